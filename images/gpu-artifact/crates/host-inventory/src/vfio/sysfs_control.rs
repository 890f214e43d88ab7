//! The writes that move one function between drivers, each followed by a
//! wait for the `driver` link to show the result.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::{VFIO_PCI, VfioError};
use crate::host_root::HostRoot;

/// How often the `driver` link is looked at while waiting.
const POLL_INTERVAL: Duration = Duration::from_millis(5);

/// The driver bound to the function at `address`, from its `driver` link.
pub fn bound_driver(root: &HostRoot, address: &str) -> Result<Option<String>, VfioError> {
    let path = root.path(format!("sys/bus/pci/devices/{address}/driver"));
    match fs::read_link(&path) {
        Ok(target) => Ok(target.file_name().map(|name| name.to_string_lossy().into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(VfioError::io("read link", path)(e)),
    }
}

/// Moves the function to vfio-pci: unbind from its driver, `driver_override`
/// = vfio-pci, bind. A function already on vfio-pci is left as it is.
pub fn bind_to_vfio(root: &HostRoot, address: &str, timeout: Duration) -> Result<(), VfioError> {
    let vfio_dir = root.path(format!("sys/bus/pci/drivers/{VFIO_PCI}"));
    if !vfio_dir.is_dir() {
        return Err(VfioError::DriverNotLoaded {
            driver: VFIO_PCI.to_owned(),
            module: "vfio_pci".to_owned(),
            path: vfio_dir,
        });
    }
    if bound_driver(root, address)?.as_deref() == Some(VFIO_PCI) {
        return Ok(());
    }
    unbind(root, address, timeout)?;
    write_control(
        &root.path(format!("sys/bus/pci/devices/{address}/driver_override")),
        VFIO_PCI,
        timeout,
    )?;
    write_control(&vfio_dir.join("bind"), address, timeout)?;
    wait_for_driver(root, address, Some(VFIO_PCI), timeout)
}

/// Gives the function back: clears `driver_override`, unbinds from the
/// current driver and binds `original` (leaves it unbound when `None`).
pub fn restore_driver(
    root: &HostRoot,
    address: &str,
    original: Option<&str>,
    timeout: Duration,
) -> Result<(), VfioError> {
    // A newline clears the override (the kernel then reads back "(null)").
    write_control(
        &root.path(format!("sys/bus/pci/devices/{address}/driver_override")),
        "\n",
        timeout,
    )?;
    if bound_driver(root, address)?.as_deref() == original {
        return Ok(());
    }
    unbind(root, address, timeout)?;
    let Some(original) = original else {
        return Ok(());
    };
    let driver_dir = root.path(format!("sys/bus/pci/drivers/{original}"));
    if !driver_dir.is_dir() {
        return Err(VfioError::DriverNotLoaded {
            driver: original.to_owned(),
            module: original.replace('-', "_"),
            path: driver_dir,
        });
    }
    write_control(&driver_dir.join("bind"), address, timeout)?;
    wait_for_driver(root, address, Some(original), timeout)
}

/// Unbinds the function from whatever driver holds it; an unbound function is left alone.
fn unbind(root: &HostRoot, address: &str, timeout: Duration) -> Result<(), VfioError> {
    if bound_driver(root, address)?.is_none() {
        return Ok(());
    }
    write_control(
        &root.path(format!("sys/bus/pci/devices/{address}/driver/unbind")),
        address,
        timeout,
    )?;
    wait_for_driver(root, address, None, timeout)
}

/// Writes a sysfs control file, waiting at most `timeout` for the write to return. Never creates
/// it: a missing file means the kernel does not offer the operation, which must be an error.
///
/// The kernel runs a driver's remove or probe inside the write, and a driver waiting for its users
/// (the nvidia driver while a process holds the card) blocks it for as long as they stay. The write
/// runs on a thread of its own so the caller gets an error naming the file in time, and releases
/// the node lock, instead of hanging with it; a thread stuck in the kernel cannot be interrupted
/// and finishes (or not) on its own.
fn write_control(path: &Path, value: &str, timeout: Duration) -> Result<(), VfioError> {
    let (done, outcome) = mpsc::channel();
    let (target, content) = (path.to_owned(), value.to_owned());
    let spawned = thread::Builder::new().name("sysfs-write".into()).spawn(move || {
        let written = OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&target)
            .map_err(VfioError::io("open", &target))
            .and_then(|mut file| {
                file.write_all(content.as_bytes())
                    .map_err(VfioError::io("write", &target))
            });
        let _ = done.send(written);
    });
    if let Err(source) = spawned {
        return Err(VfioError::io("start a writer thread for", path)(source));
    }
    match outcome.recv_timeout(timeout) {
        Ok(written) => written,
        Err(_) => Err(VfioError::WriteTimeout {
            path: path.to_owned(),
            value: value.trim().to_owned(),
            waited: timeout,
        }),
    }
}

fn wait_for_driver(root: &HostRoot, address: &str, wanted: Option<&str>, timeout: Duration) -> Result<(), VfioError> {
    let started = Instant::now();
    loop {
        let actual = bound_driver(root, address)?;
        if actual.as_deref() == wanted {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            let describe = |driver: Option<&str>| match driver {
                Some(driver) => format!("bound to {driver}"),
                None => "unbound".to_owned(),
            };
            return Err(VfioError::Timeout {
                address: address.to_owned(),
                expected: format!("expected {}", describe(wanted)),
                actual: describe(actual.as_deref()),
                waited: timeout,
            });
        }
        thread::sleep(POLL_INTERVAL);
    }
}
