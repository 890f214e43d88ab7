//! What the kernel does when user space writes the PCI driver-binding files
//! of sysfs, for fixture trees: a background thread that watches
//! `drivers/<driver>/unbind`, `drivers/<driver>/bind`, `drivers_probe` and
//! each device's `driver_override`, applies the write as the kernel would
//! (the `driver` link and the `drivers/<driver>/<address>` back link) and,
//! when asked, sends the matching `unbind`/`bind` uevents to a node agent's
//! socket.
//!
//! The real kernel applies a write before `write(2)` returns; this thread
//! applies it a few milliseconds later, so code under test must wait for the
//! `driver` link, as it should on a real host anyway. Control files are
//! emptied before the write is applied, so a caller that waited for the link
//! may write the same file again at once. Binding follows the kernel's
//! rules that matter here: a device with a `driver_override` binds only to
//! that driver; `drivers_probe` binds the override, or the driver the device
//! had when the emulator started.
//!
//! Test-only; production code must not know it exists.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::host_tree::HostTree;
use crate::kernel_uevent::UEventPayload;

/// How often the control files are read.
const POLL_INTERVAL: Duration = Duration::from_millis(2);

/// What `driver_override` reads back while no override is set.
const NO_OVERRIDE: &str = "(null)\n";

/// The running emulator; dropping it stops the thread.
pub struct KernelEmulator {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl KernelEmulator {
    /// Starts emulating on `host`. Creates the control files the kernel
    /// offers (for every device and every driver directory) and the
    /// `vfio-pci` driver directory, as if the module were loaded.
    pub fn start(host: Arc<HostTree>) -> Self {
        Self::spawn(host, None)
    }

    /// Like [`KernelEmulator::start`], and every binding change is also sent
    /// as a kernel uevent to the Unix datagram socket at `uevent_socket`
    /// (sends to a socket nobody listens on are dropped).
    pub fn start_with_uevents(host: Arc<HostTree>, uevent_socket: impl Into<PathBuf>) -> Self {
        Self::spawn(host, Some(uevent_socket.into()))
    }

    fn spawn(host: Arc<HostTree>, uevent_socket: Option<PathBuf>) -> Self {
        let boot_drivers = install_control_files(&host);
        let stop = Arc::new(AtomicBool::new(false));
        let kernel = Kernel {
            host,
            boot_drivers,
            uevent_socket,
        };
        let stopping = stop.clone();
        let thread = thread::Builder::new()
            .name("kernel-emulator".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    kernel.apply_pending_writes();
                    thread::sleep(POLL_INTERVAL);
                }
            })
            .expect("start the kernel emulator thread");
        KernelEmulator {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for KernelEmulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Kernel {
    host: Arc<HostTree>,
    /// The driver of each device when the emulator started: what `drivers_probe` binds without an override.
    boot_drivers: BTreeMap<String, String>,
    uevent_socket: Option<PathBuf>,
}

impl Kernel {
    fn apply_pending_writes(&self) {
        for driver in driver_names(&self.host) {
            let dir = self.host.path(format!("sys/bus/pci/drivers/{driver}"));
            if let Some(address) = take_command(&dir.join("unbind"))
                && self.bound_to(&address).as_deref() == Some(driver.as_str())
            {
                let events = self.host.unbind_driver(&address);
                self.send(&events);
            }
            if let Some(address) = take_command(&dir.join("bind")) {
                self.bind_if_allowed(&address, &driver);
            }
        }
        if let Some(address) = take_command(&self.host.path("sys/bus/pci/drivers_probe")) {
            let wanted = self
                .override_of(&address)
                .or_else(|| self.boot_drivers.get(&address).cloned());
            if let Some(driver) = wanted {
                self.bind_if_allowed(&address, &driver);
            }
        }
    }

    /// The kernel refuses a bind to a bound device (-EBUSY) and one its
    /// override excludes (-ENODEV); the writer would see the error, here it
    /// sees the link not change.
    fn bind_if_allowed(&self, address: &str, driver: &str) {
        let Some(device) = self.host.device(address) else {
            return;
        };
        let override_allows = self.override_of(address).is_none_or(|wanted| wanted == driver);
        if device.driver.is_none() && override_allows {
            let events = self.host.bind_driver(address, driver);
            self.send(&events);
        }
    }

    fn bound_to(&self, address: &str) -> Option<String> {
        self.host.device(address).and_then(|device| device.driver)
    }

    fn override_of(&self, address: &str) -> Option<String> {
        let path = self.host.path(format!("sys/bus/pci/devices/{address}/driver_override"));
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            // No file: no override, as a kernel without one shows "(null)".
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => String::new(),
            // Any other failure is the fixture's fault: no driver matches what could not be read,
            // so the device stays unbound and the test waiting for a binding fails with it.
            Err(error) => {
                eprintln!("kernel emulator: reading {}: {error}", path.display());
                return Some(format!("<unreadable: {error}>"));
            }
        };
        let value = text.trim();
        (!value.is_empty() && value != "(null)").then(|| value.to_owned())
    }

    fn send(&self, events: &[UEventPayload]) {
        let Some(socket) = &self.uevent_socket else {
            return;
        };
        let Ok(sender) = UnixDatagram::unbound() else {
            return;
        };
        for event in events {
            let _ = sender.send_to(event, socket);
        }
    }
}

/// Creates the write-only files the kernel offers and returns each device's driver.
fn install_control_files(host: &HostTree) -> BTreeMap<String, String> {
    let mut boot_drivers = BTreeMap::new();
    host.write_file("sys/bus/pci/drivers/vfio-pci/new_id", "");
    host.write_file("sys/bus/pci/drivers_probe", "");
    for device in host.devices() {
        host.write_file(
            format!("sys/bus/pci/devices/{}/driver_override", device.address),
            NO_OVERRIDE,
        );
        if let Some(driver) = device.driver {
            boot_drivers.insert(device.address, driver);
        }
    }
    for driver in driver_names(host) {
        host.write_file(format!("sys/bus/pci/drivers/{driver}/bind"), "");
        host.write_file(format!("sys/bus/pci/drivers/{driver}/unbind"), "");
    }
    boot_drivers
}

fn driver_names(host: &HostTree) -> Vec<String> {
    let Ok(entries) = fs::read_dir(host.path("sys/bus/pci/drivers")) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// The address written to a control file, which is emptied before the write
/// is applied (see the module docs).
fn take_command(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let address = text.trim();
    if address.is_empty() {
        return None;
    }
    let address = address.to_owned();
    fs::write(path, "").ok()?;
    Some(address)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named_hosts::NamedHost;
    use std::time::Instant;

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let started = Instant::now();
        while !done() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "timed out waiting for {what}"
            );
            thread::sleep(Duration::from_millis(2));
        }
    }

    fn driver_link(host: &HostTree, address: &str) -> Option<String> {
        fs::read_link(host.path(format!("sys/bus/pci/devices/{address}/driver")))
            .ok()
            .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()))
    }

    #[test]
    fn unbind_override_and_bind_move_a_card_to_vfio_and_back() {
        let host = Arc::new(NamedHost::A30Pcie.build());
        let _kernel = KernelEmulator::start(host.clone());
        let card = "0000:01:00.0";
        fs::write(host.path(format!("sys/bus/pci/devices/{card}/driver/unbind")), card).unwrap();
        wait_until("unbind", || driver_link(&host, card).is_none());
        assert!(!host.path("sys/bus/pci/drivers/nvidia/0000:01:00.0").exists());
        assert_eq!(
            fs::read_to_string(host.path("sys/bus/pci/drivers/nvidia/unbind")).unwrap(),
            ""
        );

        // Without the override vfio-pci does not take the card; nvidia is excluded by it.
        fs::write(
            host.path(format!("sys/bus/pci/devices/{card}/driver_override")),
            "vfio-pci",
        )
        .unwrap();
        fs::write(host.path("sys/bus/pci/drivers/nvidia/bind"), card).unwrap();
        wait_until("the refused bind to be consumed", || {
            fs::read_to_string(host.path("sys/bus/pci/drivers/nvidia/bind"))
                .unwrap()
                .is_empty()
        });
        assert_eq!(driver_link(&host, card), None);
        fs::write(host.path("sys/bus/pci/drivers/vfio-pci/bind"), card).unwrap();
        wait_until("bind", || driver_link(&host, card).as_deref() == Some("vfio-pci"));
        assert!(host.path("sys/bus/pci/drivers/vfio-pci/0000:01:00.0").exists());
        assert_eq!(host.device(card).unwrap().driver.as_deref(), Some("vfio-pci"));

        fs::write(host.path(format!("sys/bus/pci/devices/{card}/driver_override")), "\n").unwrap();
        fs::write(host.path("sys/bus/pci/drivers/vfio-pci/unbind"), card).unwrap();
        wait_until("unbind from vfio", || driver_link(&host, card).is_none());
        fs::write(host.path("sys/bus/pci/drivers_probe"), card).unwrap();
        wait_until("probe", || driver_link(&host, card).as_deref() == Some("nvidia"));
    }

    #[test]
    fn binding_changes_reach_the_agent_socket_as_uevents() {
        let dir = tempfile::tempdir().unwrap();
        let socket_path = dir.path().join("uevent.sock");
        let agent = UnixDatagram::bind(&socket_path).unwrap();
        agent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let host = Arc::new(NamedHost::A30Pcie.build());
        let _kernel = KernelEmulator::start_with_uevents(host.clone(), &socket_path);
        fs::write(
            host.path("sys/bus/pci/devices/0000:01:00.0/driver/unbind"),
            "0000:01:00.0",
        )
        .unwrap();
        let mut buffer = [0u8; 4096];
        let length = agent.recv(&mut buffer).unwrap();
        let event = String::from_utf8_lossy(&buffer[..length]).into_owned();
        assert!(
            event.starts_with("unbind@/devices/pci0000:00/0000:00:01.0/0000:01:00.0\0"),
            "{event}"
        );
        assert!(event.contains("\0PCI_SLOT_NAME=0000:01:00.0\0"), "{event}");
    }
}
