//! Handing PCI functions to `vfio-pci` and back, through the kernel's sysfs
//! control files under one [`HostRoot`]: the only place this crate writes to
//! the host, and only when the prepare pipeline asks for a claim.
//!
//! The kernel's protocol (Documentation/ABI/testing/sysfs-bus-pci):
//! write the address to `<device>/driver/unbind`, write the driver's name to
//! `<device>/driver_override`, write the address to
//! `/sys/bus/pci/drivers/<driver>/bind`. The kernel applies each write before
//! it returns; this module still waits for the `driver` link to show the
//! result (with a timeout), so a host where the write was accepted but not
//! applied is an error that names the function, not a silent half-state.
//!
//! It never decides whether a function may be moved (no running processes,
//! bare metal, an exclusive allocation): that is the caller's business.

mod group;
mod own_functions;
mod sysfs_control;

use std::path::PathBuf;
use std::time::Duration;

pub use group::{PciFunction, check_group_viable, group_functions, iommu_group, read_function};
pub use own_functions::{GroupSplit, split_group};
pub use sysfs_control::{bind_to_vfio, bound_driver, restore_driver};

/// The kernel driver that hands a function to user space (QEMU).
pub const VFIO_PCI: &str = "vfio-pci";

/// `sys/kernel/iommu_groups`: one directory per group, its functions under `devices/`.
pub const IOMMU_GROUPS_DIR: &str = "sys/kernel/iommu_groups";

/// Why a function could not be moved or checked.
#[derive(Debug, thiserror::Error)]
pub enum VfioError {
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The function has no `iommu_group` link: the IOMMU is off, so it cannot be passed through.
    #[error("PCI function {address} has no IOMMU group ({} is missing); enable the IOMMU (intel_iommu=on or amd_iommu=on) to pass it through", path.display())]
    NoIommuGroup { address: String, path: PathBuf },
    /// The driver's directory is missing: its module is not loaded.
    #[error("driver {driver} is not loaded ({} is missing); load it with `modprobe {module}`", path.display())]
    DriverNotLoaded {
        driver: String,
        module: String,
        path: PathBuf,
    },
    /// The kernel accepted the write but the binding did not change in time.
    #[error("PCI function {address}: {expected} after {waited:?}, but it is {actual}")]
    Timeout {
        address: String,
        expected: String,
        actual: String,
        waited: Duration,
    },
    /// A write to a sysfs control file did not return in time (a driver blocked in remove or probe).
    #[error("writing {value:?} to {} did not return within {waited:?}: the kernel driver is blocked (a process may still hold the device); the write was abandoned", path.display())]
    WriteTimeout {
        path: PathBuf,
        value: String,
        waited: Duration,
    },
    /// A function of the group is not on vfio-pci, so QEMU cannot open the group.
    #[error("IOMMU group {group} is not viable: {}", describe_offenders(offenders))]
    NotViable {
        group: u32,
        /// Address and bound driver of every function that is neither on vfio-pci nor a bridge.
        offenders: Vec<(String, Option<String>)>,
    },
}

impl VfioError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> VfioError {
        let path = path.into();
        move |source| VfioError::Io { action, path, source }
    }
}

/// `0000:01:00.1 (bound to snd_hda_intel), 0000:01:00.2 (unbound)`.
fn describe_offenders(offenders: &[(String, Option<String>)]) -> String {
    let listed: Vec<String> = offenders
        .iter()
        .map(|(address, driver)| match driver {
            Some(driver) => format!("{address} (bound to {driver})"),
            None => format!("{address} (unbound)"),
        })
        .collect();
    format!("{} not on {VFIO_PCI}", listed.join(", "))
}
