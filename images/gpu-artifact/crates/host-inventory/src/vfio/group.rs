//! IOMMU groups: which functions the IOMMU cannot isolate from each other.
//! QEMU can open a group only when every function in it is on vfio-pci
//! (PCI bridges excepted: the kernel lets them stay with their driver).

use std::fs;

use super::sysfs_control::bound_driver;
use super::{IOMMU_GROUPS_DIR, VFIO_PCI, VfioError};
use crate::host_root::HostRoot;

/// PCI class 0x0604: a PCI-to-PCI bridge (root and switch ports).
const CLASS_PCI_BRIDGE: u32 = 0x0604;

/// One PCI function as passthrough needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciFunction {
    /// e.g. `0000:01:00.1`.
    pub address: String,
    pub vendor_id: u16,
    pub device_id: u16,
    /// 24-bit class code, e.g. `0x040300` for HD audio.
    pub class: u32,
    /// The bound driver's name, `None` when unbound.
    pub driver: Option<String>,
}

impl PciFunction {
    pub fn is_bridge(&self) -> bool {
        self.class >> 8 == CLASS_PCI_BRIDGE
    }
}

/// The IOMMU group of the function at `address`, from its `iommu_group` link.
pub fn iommu_group(root: &HostRoot, address: &str) -> Result<u32, VfioError> {
    let path = root.path(format!("sys/bus/pci/devices/{address}/iommu_group"));
    let target = match fs::read_link(&path) {
        Ok(target) => target,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(VfioError::NoIommuGroup {
                address: address.to_owned(),
                path,
            });
        }
        Err(e) => return Err(VfioError::io("read link", path)(e)),
    };
    target
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.parse().ok())
        .ok_or_else(|| VfioError::Io {
            action: "read the group number of",
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "the link does not end in a number"),
        })
}

/// The function at `address` with its ids, class and driver.
pub fn read_function(root: &HostRoot, address: &str) -> Result<PciFunction, VfioError> {
    let dir = root.path(format!("sys/bus/pci/devices/{address}"));
    let hex = |name: &str| -> Result<u32, VfioError> {
        let path = dir.join(name);
        let text = fs::read_to_string(&path).map_err(VfioError::io("read", &path))?;
        let digits = text.trim().trim_start_matches("0x");
        u32::from_str_radix(digits, 16).map_err(|_| VfioError::Io {
            action: "parse",
            path,
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{:?} is not hex", text.trim())),
        })
    };
    Ok(PciFunction {
        address: address.to_owned(),
        vendor_id: hex("vendor")? as u16,
        device_id: hex("device")? as u16,
        class: hex("class")?,
        driver: bound_driver(root, address)?,
    })
}

/// Every function of `group`, in address order.
pub fn group_functions(root: &HostRoot, group: u32) -> Result<Vec<PciFunction>, VfioError> {
    let dir = root.path(format!("{IOMMU_GROUPS_DIR}/{group}/devices"));
    let mut addresses = Vec::new();
    for entry in fs::read_dir(&dir).map_err(VfioError::io("list", &dir))? {
        let entry = entry.map_err(VfioError::io("list", &dir))?;
        addresses.push(entry.file_name().to_string_lossy().into_owned());
    }
    addresses.sort();
    addresses.iter().map(|address| read_function(root, address)).collect()
}

/// Ok when every function of `group` but bridges is bound to vfio-pci.
pub fn check_group_viable(root: &HostRoot, group: u32) -> Result<(), VfioError> {
    let offenders: Vec<(String, Option<String>)> = group_functions(root, group)?
        .into_iter()
        .filter(|function| !function.is_bridge() && function.driver.as_deref() != Some(VFIO_PCI))
        .map(|function| (function.address, function.driver))
        .collect();
    if offenders.is_empty() {
        Ok(())
    } else {
        Err(VfioError::NotViable { group, offenders })
    }
}
