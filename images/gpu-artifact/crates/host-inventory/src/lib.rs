//! Reads a node's GPUs and host facts from sysfs, pci.ids, os-release and DMI
//! under one configurable root, and parses kernel uevents.
//!
//! What it is for: the inventory half of the node agent. [`scan_gpus`]
//! lists the GPUs (ids, names, bound driver, NUMA node, IOMMU group, index,
//! model label, PCIe root complex), [`read_host_facts`] the OS, kernel and bare-metal verdict,
//! and [`uevent`] says when to look again. [`vfio`] moves a card's PCI
//! functions to `vfio-pci` and back for the prepare pipeline.
//!
//! What it must never do: talk to Kubernetes or NVML, write to the host
//! anywhere but the sysfs driver-binding files of [`vfio`] (and only when
//! asked), or touch a host path other than through [`HostRoot`]. It returns
//! plain data; what becomes a `PhysicalGPU` is the agent's business.

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod bare_metal;
mod gpu_filter;
mod gpu_scan;
mod host_facts;
mod host_root;
mod model_label;
mod pci_address;
mod pci_gpu;
mod pci_ids;
mod pcie_root;
mod sysfs_attribute;
pub mod uevent;
pub mod vfio;

pub use bare_metal::{
    BareMetalVerdict, DMI_PRODUCT_NAME, DMI_SYS_VENDOR, HYPERVISOR_MARKERS, detect_bare_metal, judge_dmi,
};
pub use gpu_filter::{
    CLASS_3D_CONTROLLER, CLASS_VGA_CONTROLLER, GpuFilter, VENDOR_AMD, VENDOR_INTEL, VENDOR_NVIDIA, vendor_label,
};
pub use gpu_scan::{PCI_DEVICES_DIR, Scan, scan_gpus};
pub use host_facts::{HostFacts, KERNEL_RELEASE, OS_RELEASE_PATHS, parse_os_release, read_host_facts};
pub use host_root::HostRoot;
pub use model_label::model_label;
pub use pci_address::{PciAddress, PciAddressError};
pub use pci_gpu::{BoundDriver, PciGpu};
pub use pci_ids::{PCI_IDS_PATHS, PciIds, PciIdsError};
pub use pcie_root::pcie_root;
pub use sysfs_attribute::ScanWarning;
