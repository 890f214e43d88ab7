//! One GPU as found in sysfs, and how its attributes are read: only the few
//! files the inventory needs, and the rest of a device only once its vendor
//! and class say it is a GPU.

use std::path::Path;

use crate::gpu_filter::GpuFilter;
use crate::model_label::model_label;
use crate::pci_ids::PciIds;
use crate::sysfs_attribute::{AttributeError, DeviceDir, ScanWarning};

/// A GPU on the PCI bus, with names from pci.ids where the database has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciGpu {
    /// Bus address as in sysfs, e.g. `0000:01:00.0`.
    pub address: String,
    /// Class and subclass, four lower-case hex digits: `0302`.
    pub class_code: String,
    pub class_name: Option<String>,
    /// Four lower-case hex digits: `10de`.
    pub vendor_id: String,
    pub vendor_name: Option<String>,
    /// Four lower-case hex digits: `20b7`.
    pub device_id: String,
    pub device_name: Option<String>,
    pub subsystem_vendor_id: Option<String>,
    pub subsystem_device_id: Option<String>,
    pub subsystem_name: Option<String>,
    /// The bound driver; `None` when no driver is bound.
    pub driver: Option<BoundDriver>,
    /// `None` when the platform reports no NUMA affinity (sysfs `-1`).
    pub numa_node: Option<u32>,
    /// `None` when the IOMMU is off.
    pub iommu_group: Option<u32>,
    /// Position among this node's GPUs sorted by PCI address.
    pub index: usize,
    /// Normalised model, see [`model_label`].
    pub model_label: String,
    /// The PCIe root complex, `pci<domain>:<bus>` (see [`crate::pcie_root`]); `None` when sysfs
    /// does not show one.
    pub pcie_root: Option<String>,
}

/// The driver a GPU is bound to, as `currentState.driverType` needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundDriver {
    /// `nvidia`.
    Nvidia,
    /// `vfio-pci`: handed to a VM.
    Vfio,
    /// Any other driver (`nouveau`, `amdgpu`, ...), by name, for the caller to judge.
    Other(String),
}

impl BoundDriver {
    pub fn from_name(name: &str) -> Self {
        match name {
            "nvidia" => Self::Nvidia,
            "vfio-pci" => Self::Vfio,
            other => Self::Other(other.to_string()),
        }
    }

    /// The kernel driver's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Nvidia => "nvidia",
            Self::Vfio => "vfio-pci",
            Self::Other(name) => name,
        }
    }
}

/// What reading one listed device gave.
pub(crate) enum DeviceReading {
    Gpu(Box<PciGpu>),
    NotAGpu,
    /// Hot-removed between the listing and the read: not worth a warning.
    Vanished,
    Skipped(ScanWarning),
}

/// Reads the device at `dir`; problems with optional attributes go to `warnings`.
/// The index is left at 0 for the scan to assign.
pub(crate) fn read_device(
    dir: &Path,
    address: &str,
    filter: &GpuFilter,
    ids: Option<&PciIds>,
    warnings: &mut Vec<ScanWarning>,
) -> DeviceReading {
    match read_required(&DeviceDir { dir }, address, filter, ids, warnings) {
        Ok(Some(gpu)) => DeviceReading::Gpu(Box::new(gpu)),
        Ok(None) => DeviceReading::NotAGpu,
        Err(AttributeError::Vanished) => DeviceReading::Vanished,
        Err(AttributeError::Bad(warning)) => DeviceReading::Skipped(warning),
    }
}

fn read_required(
    dev: &DeviceDir<'_>,
    address: &str,
    filter: &GpuFilter,
    ids: Option<&PciIds>,
    warnings: &mut Vec<ScanWarning>,
) -> Result<Option<PciGpu>, AttributeError> {
    let vendor = dev.hex("vendor", 0xffff)? as u16;
    let class = dev.hex("class", 0xff_ffff)?;
    if !filter.matches(vendor, class) {
        return Ok(None);
    }
    let device = dev.hex("device", 0xffff)? as u16;
    let class_code = (class >> 8) as u16;
    let subsystem_vendor = optional(dev.hex("subsystem_vendor", 0xffff), warnings)?.map(|v| v as u16);
    let subsystem_device = optional(dev.hex("subsystem_device", 0xffff), warnings)?.map(|v| v as u16);
    let driver = optional(dev.link_name("driver"), warnings)?.flatten();
    let numa_node = optional(read_numa_node(dev), warnings)?.flatten();
    let iommu_group = optional(read_iommu_group(dev), warnings)?.flatten();

    let device_name = ids.and_then(|ids| ids.device_name(vendor, device));
    let subsystem_name = match (ids, subsystem_vendor, subsystem_device) {
        (Some(ids), Some(sv), Some(sd)) => ids.subsystem_name(vendor, device, sv, sd),
        _ => None,
    };
    Ok(Some(PciGpu {
        address: address.to_string(),
        class_code: format!("{class_code:04x}"),
        class_name: ids.and_then(|ids| ids.class_name(class_code)).map(str::to_string),
        vendor_id: format!("{vendor:04x}"),
        vendor_name: ids.and_then(|ids| ids.vendor_name(vendor)).map(str::to_string),
        device_id: format!("{device:04x}"),
        device_name: device_name.map(str::to_string),
        subsystem_vendor_id: subsystem_vendor.map(|v| format!("{v:04x}")),
        subsystem_device_id: subsystem_device.map(|d| format!("{d:04x}")),
        subsystem_name: subsystem_name.map(str::to_string),
        driver: driver.as_deref().map(BoundDriver::from_name),
        numa_node,
        iommu_group,
        index: 0,
        model_label: model_label(device_name, vendor, device),
        pcie_root: None,
    }))
}

/// An attribute that only enriches the GPU: a bad value is a warning and no
/// value, and only a vanished device stops the read.
fn optional<T>(
    result: Result<T, AttributeError>,
    warnings: &mut Vec<ScanWarning>,
) -> Result<Option<T>, AttributeError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(AttributeError::Vanished) => Err(AttributeError::Vanished),
        Err(AttributeError::Bad(warning)) => {
            warnings.push(warning);
            Ok(None)
        }
    }
}

/// `numa_node` holds `-1` when the platform gives no affinity; absent on kernels without NUMA.
fn read_numa_node(dev: &DeviceDir<'_>) -> Result<Option<u32>, AttributeError> {
    let Some(text) = dev.optional_text("numa_node")? else {
        return Ok(None);
    };
    match text.parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(node) => u32::try_from(node)
            .map(Some)
            .map_err(|_| dev.garbage("numa_node", &text, "a NUMA node or -1")),
        Err(_) => Err(dev.garbage("numa_node", &text, "a NUMA node or -1")),
    }
}

/// `iommu_group -> ../../../../kernel/iommu_groups/<n>`; no link when the IOMMU is off.
fn read_iommu_group(dev: &DeviceDir<'_>) -> Result<Option<u32>, AttributeError> {
    match dev.link_name("iommu_group")? {
        None => Ok(None),
        Some(group) => group
            .parse()
            .map(Some)
            .map_err(|_| dev.garbage("iommu_group", &group, "a link to an IOMMU group number")),
    }
}
