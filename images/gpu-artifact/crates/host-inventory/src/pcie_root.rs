//! The PCIe root complex a PCI function hangs below, as the standard device attribute
//! `resource.kubernetes.io/pcieRoot` names it: `pci<domain>:<bus>`, the first directory below
//! `/sys/devices` on the path `/sys/bus/pci/devices/<address>` links to (as
//! `deviceattribute.GetPCIeRootAttributeByPCIBusID` of k8s.io/dynamic-resource-allocation reads it).
//! Devices behind one root complex share it, which is what topology-aware consumers (KubeVirt's
//! NUMA and PCIe placement) compare.

use std::path::{Component, Path};

use crate::host_root::HostRoot;

/// The root complex of the function at `address` (`0000:41:00.0`), or `None` when sysfs does not
/// show one (no such device, or a link that does not lead to `/sys/devices/pci…/…/<address>`).
pub fn pcie_root(root: &HostRoot, address: &str) -> Option<String> {
    let link = Path::new("sys/bus/pci/devices").join(address);
    let target = std::fs::read_link(root.path(&link)).ok()?;
    // Relative to the link's directory, as the kernel writes it: `../../../devices/pci0000:40/...`.
    let resolved = normalise(&link.parent()?.join(target));
    let mut parts = resolved
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let (sys, devices, complex) = (parts.next()?, parts.next()?, parts.next()?);
    let last = resolved.file_name()?.to_string_lossy();
    (sys == "sys" && devices == "devices" && complex.starts_with("pci") && last == address).then_some(complex)
}

/// `a/b/../c` -> `a/c`, without touching the file system.
fn normalise(path: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    fn link(root: &Path, address: &str, target: &str) {
        let dir = root.join("sys/bus/pci/devices");
        std::fs::create_dir_all(&dir).unwrap();
        symlink(target, dir.join(address)).unwrap();
    }

    #[test]
    fn the_root_complex_is_the_first_directory_below_sys_devices() {
        let dir = tempfile::tempdir().unwrap();
        link(
            dir.path(),
            "0000:41:00.0",
            "../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0",
        );
        link(
            dir.path(),
            "0001:01:00.0",
            "../../../devices/pci0001:00/0001:00:01.0/0001:01:00.0",
        );
        let root = HostRoot::new(dir.path());
        assert_eq!(pcie_root(&root, "0000:41:00.0").as_deref(), Some("pci0000:40"));
        assert_eq!(pcie_root(&root, "0001:01:00.0").as_deref(), Some("pci0001:00"));
    }

    #[test]
    fn a_missing_device_or_an_odd_link_has_none() {
        let dir = tempfile::tempdir().unwrap();
        link(dir.path(), "0000:02:00.0", "../../../devices/platform/0000:02:00.0");
        link(dir.path(), "0000:03:00.0", "../../../devices/pci0000:00/0000:03:00.1");
        let root = HostRoot::new(dir.path());
        assert_eq!(pcie_root(&root, "0000:01:00.0"), None);
        assert_eq!(pcie_root(&root, "0000:02:00.0"), None);
        assert_eq!(pcie_root(&root, "0000:03:00.0"), None);
    }
}
