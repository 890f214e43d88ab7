//! Writes and removes one PCI device in a fixture's sysfs the way the kernel
//! lays it out: the device directory under `sys/devices/...`, the
//! `sys/bus/pci/devices/<address>` link to it, and the relative `driver`,
//! `iommu_group` and `subsystem` links, with their back links under
//! `sys/bus/pci/drivers/<name>/` and `sys/kernel/iommu_groups/<n>/devices/`.
//!
//! Links are relative, as in real sysfs, so a tree stays valid wherever its
//! root is, and code under test that follows them sees the real shapes.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use crate::fixture_device::FixtureDevice;

/// Creates the device directory, its attribute files and its links (all but `driver`).
pub(crate) fn create_device(root: &Path, device: &FixtureDevice) {
    let devpath = device.devpath();
    let dir = root.join("sys").join(&devpath);
    create_dir_all(&dir);
    // Each attribute as the kernel prints it: "0x%06x" for class, "0x%04x" for ids.
    write(&dir.join("class"), &format!("0x{:06x}\n", device.class));
    write(&dir.join("vendor"), &format!("0x{:04x}\n", device.vendor));
    write(&dir.join("device"), &format!("0x{:04x}\n", device.device));
    write(
        &dir.join("subsystem_vendor"),
        &format!("0x{:04x}\n", device.subsystem_vendor),
    );
    write(
        &dir.join("subsystem_device"),
        &format!("0x{:04x}\n", device.subsystem_device),
    );
    write(&dir.join("numa_node"), &format!("{}\n", device.numa_node));

    let up = up_to_sys(&devpath);
    let bus_devices = root.join("sys/bus/pci/devices");
    create_dir_all(&bus_devices);
    link(&format!("{up}bus/pci"), &dir.join("subsystem"));
    link(&format!("../../../{devpath}"), &bus_devices.join(&device.address));
    if let Some(group) = device.iommu_group {
        let group_dir = root.join(format!("sys/kernel/iommu_groups/{group}"));
        create_dir_all(&group_dir.join("devices"));
        link(&format!("{up}kernel/iommu_groups/{group}"), &dir.join("iommu_group"));
        link(
            &format!("../../../../{devpath}"),
            &group_dir.join("devices").join(&device.address),
        );
    }
}

/// Binds: `<device>/driver` and `sys/bus/pci/drivers/<driver>/<address>`.
pub(crate) fn link_driver(root: &Path, device: &FixtureDevice, driver: &str) {
    let devpath = device.devpath();
    let driver_dir = root.join("sys/bus/pci/drivers").join(driver);
    create_dir_all(&driver_dir);
    // The device's `driver` link is what code waits on (the kernel emulator binds in a thread of its
    // own), so it appears last, when everything else of the binding is in place.
    link(&format!("../../../../{devpath}"), &driver_dir.join(&device.address));
    link(
        &format!("{}bus/pci/drivers/{driver}", up_to_sys(&devpath)),
        &root.join("sys").join(&devpath).join("driver"),
    );
}

/// Unbinds: removes both driver links, the device's `driver` link last (see [`link_driver`]); the
/// driver directory stays, as a loaded module's does.
pub(crate) fn unlink_driver(root: &Path, device: &FixtureDevice, driver: &str) {
    remove_link(&root.join("sys/bus/pci/drivers").join(driver).join(&device.address));
    remove_link(&root.join("sys").join(device.devpath()).join("driver"));
}

/// Removes the device directory and every link to it.
pub(crate) fn remove_device(root: &Path, device: &FixtureDevice) {
    if let Some(driver) = &device.driver {
        unlink_driver(root, device, driver);
    }
    remove_link(&root.join("sys/bus/pci/devices").join(&device.address));
    if let Some(group) = device.iommu_group {
        let group_dir = root.join(format!("sys/kernel/iommu_groups/{group}"));
        remove_link(&group_dir.join("devices").join(&device.address));
        // The kernel frees a group with its last device.
        if is_empty_dir(&group_dir.join("devices")) {
            remove_dir_all(&group_dir);
        }
    }
    remove_dir_all(&root.join("sys").join(device.devpath()));
}

/// `../` repeated once per component of `devpath`: from the device directory back to `sys/`.
fn up_to_sys(devpath: &str) -> String {
    "../".repeat(devpath.split('/').count())
}

fn is_empty_dir(dir: &Path) -> bool {
    fs::read_dir(dir)
        .map(|mut entries| entries.next().is_none())
        .unwrap_or(false)
}

fn create_dir_all(dir: &PathBuf) {
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
}

fn write(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn link(target: &str, at: &Path) {
    symlink(target, at).unwrap_or_else(|e| panic!("link {} -> {target}: {e}", at.display()));
}

fn remove_link(at: &Path) {
    match fs::remove_file(at) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", at.display()),
    }
}

fn remove_dir_all(dir: &Path) {
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", dir.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_to_the_device_directory_like_real_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let gpu = FixtureDevice::a30_pcie("0000:01:00.0").with_iommu_group(13);
        create_device(root.path(), &gpu);
        link_driver(root.path(), &gpu, "nvidia");

        let via_bus = root.path().join("sys/bus/pci/devices/0000:01:00.0");
        let real = root.path().join("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0");
        assert_eq!(fs::canonicalize(&via_bus).unwrap(), fs::canonicalize(&real).unwrap());
        assert_eq!(
            fs::canonicalize(via_bus.join("driver")).unwrap(),
            fs::canonicalize(root.path().join("sys/bus/pci/drivers/nvidia")).unwrap()
        );
        assert_eq!(
            fs::canonicalize(root.path().join("sys/kernel/iommu_groups/13/devices/0000:01:00.0")).unwrap(),
            fs::canonicalize(&real).unwrap()
        );
        assert_eq!(fs::read_to_string(real.join("class")).unwrap(), "0x030200\n");

        remove_device(root.path(), &gpu.with_driver("nvidia"));
        assert!(!real.exists());
        assert!(fs::symlink_metadata(&via_bus).is_err());
        assert!(!root.path().join("sys/kernel/iommu_groups/13").exists());
    }
}
