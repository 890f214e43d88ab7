//! One pass over `sys/bus/pci/devices`: every GPU the filter accepts, in
//! PCI address order with its index, and a warning for every device that
//! had to be skipped. Cheap enough to run on every relevant uevent: a
//! non-GPU costs two small reads (vendor, class).

use std::ffi::OsString;
use std::fs;

use crate::gpu_filter::GpuFilter;
use crate::host_root::HostRoot;
use crate::pci_address::PciAddress;
use crate::pci_gpu::{DeviceReading, PciGpu, read_device};
use crate::pci_ids::PciIds;
use crate::sysfs_attribute::ScanWarning;

/// Where sysfs lists every PCI function, as links to the device directories.
pub const PCI_DEVICES_DIR: &str = "sys/bus/pci/devices";

/// The result of a scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scan {
    /// The GPUs, sorted by PCI address; `gpus[i].index == i`.
    pub gpus: Vec<PciGpu>,
    /// Devices (or attributes) that could not be read, each naming its path.
    /// The caller logs them; the library does not.
    pub warnings: Vec<ScanWarning>,
}

/// Finds the GPUs under `root`. Never fails: an unreadable bus is a warning
/// and no GPUs, a bad device is a warning and the others are still found, a
/// device that disappears mid-scan is left out silently.
///
/// A skipped GPU does not take an index, so the indices of the GPUs after it
/// move up until it reads again; the warning says which device that was.
pub fn scan_gpus(root: &HostRoot, filter: &GpuFilter, ids: Option<&PciIds>) -> Scan {
    let bus = root.path(PCI_DEVICES_DIR);
    let listing = match fs::read_dir(&bus) {
        Ok(entries) => entries.filter_map(|entry| entry.ok().map(|e| e.file_name())).collect(),
        Err(error) => {
            let warning = ScanWarning {
                path: bus,
                problem: format!("cannot list PCI devices: {error}"),
            };
            return Scan {
                gpus: Vec::new(),
                warnings: vec![warning],
            };
        }
    };
    scan_listed(root, listing, filter, ids)
}

/// Reads the listed entries; separate from the listing so a test can remove a
/// device between the two, as a hot-unplug does.
fn scan_listed(root: &HostRoot, listing: Vec<OsString>, filter: &GpuFilter, ids: Option<&PciIds>) -> Scan {
    let bus = root.path(PCI_DEVICES_DIR);
    let mut found: Vec<(PciAddress, Box<PciGpu>)> = Vec::new();
    let mut warnings = Vec::new();
    for name in listing {
        let dir = bus.join(&name);
        let Some(address) = name.to_str().and_then(|n| n.parse::<PciAddress>().ok()) else {
            let problem = "not a PCI address; entry ignored".to_string();
            warnings.push(ScanWarning { path: dir, problem });
            continue;
        };
        let name = name.to_string_lossy();
        match read_device(&dir, &name, filter, ids, &mut warnings) {
            DeviceReading::Gpu(gpu) => found.push((address, gpu)),
            DeviceReading::NotAGpu | DeviceReading::Vanished => {}
            DeviceReading::Skipped(warning) => warnings.push(ScanWarning {
                problem: format!("{}; device skipped", warning.problem),
                ..warning
            }),
        }
    }
    found.sort_by_key(|(address, _)| *address);
    let gpus = found
        .into_iter()
        .enumerate()
        .map(|(index, (_, gpu))| PciGpu {
            index,
            pcie_root: crate::pcie_root(root, &gpu.address),
            ..*gpu
        })
        .collect();
    Scan { gpus, warnings }
}

#[cfg(test)]
mod tests {
    use super::*;
    use host_fixtures::{FixtureDevice, HostTree};

    #[test]
    fn a_device_removed_between_listing_and_reading_is_left_out_without_a_warning() {
        let host = HostTree::new();
        host.place_device(&FixtureDevice::a30_pcie("0000:01:00.0"));
        host.place_device(&FixtureDevice::a30_pcie("0000:02:00.0"));
        let root = HostRoot::new(host.root());
        let listing: Vec<OsString> = fs::read_dir(root.path(PCI_DEVICES_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(listing.len(), 2);

        host.remove_device("0000:01:00.0");
        let scan = scan_listed(&root, listing, &GpuFilter::nvidia(), None);

        assert_eq!(scan.warnings, []);
        assert_eq!(scan.gpus.len(), 1);
        assert_eq!(scan.gpus[0].address, "0000:02:00.0");
        assert_eq!(scan.gpus[0].index, 0);
    }

    #[test]
    fn a_device_whose_directory_is_gone_behind_a_stale_link_is_left_out() {
        // The kernel removes the directory and the bus link one after the
        // other; a scan can land between the two.
        let host = HostTree::new();
        let gpu = FixtureDevice::a30_pcie("0000:01:00.0");
        host.place_device(&gpu);
        host.remove(format!("sys/{}", gpu.devpath()));

        let scan = scan_gpus(&HostRoot::new(host.root()), &GpuFilter::nvidia(), None);
        assert_eq!(scan, Scan::default());
    }

    #[test]
    fn an_unlistable_bus_is_one_warning_and_no_gpus() {
        let empty = tempfile::tempdir().unwrap();
        let scan = scan_gpus(&HostRoot::new(empty.path()), &GpuFilter::nvidia(), None);
        assert!(scan.gpus.is_empty());
        assert_eq!(scan.warnings.len(), 1);
        assert_eq!(scan.warnings[0].path, empty.path().join(PCI_DEVICES_DIR));
    }
}
