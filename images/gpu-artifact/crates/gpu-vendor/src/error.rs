//! Why a vendor call failed, in terms the handler acts on.

use crate::pci_address::PciAddress;

/// A vendor call failure. Each variant maps to a different reaction: report
/// the driver as not ready, refuse a claim, retry later, or reconcile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VendorError {
    /// The management library cannot be loaded or lacks a required symbol.
    #[error("the vendor management library is unavailable: {reason}")]
    Unavailable { reason: String },
    /// The library loaded but the kernel driver is not running.
    #[error("the vendor kernel driver is not loaded")]
    DriverNotLoaded,
    /// No card at this PCI address is known to the library.
    #[error("no GPU at PCI address {0}")]
    NotFound(PciAddress),
    /// The card has no MIG instance with these ids.
    #[error("GPU {pci_address}: no MIG instance with GPU instance id {gpu_instance_id}{}", compute_instance_id.map(|ci| format!(" and compute instance id {ci}")).unwrap_or_default())]
    InstanceNotFound {
        pci_address: PciAddress,
        gpu_instance_id: u32,
        compute_instance_id: Option<u32>,
    },
    /// The card cannot do what was asked (no MIG, no such profile, ...).
    #[error("GPU {pci_address}: not supported: {what}")]
    NotSupported { pci_address: PciAddress, what: String },
    /// Something is running or still exists where the change needs an idle
    /// card or instance (processes, compute instances).
    #[error("GPU {pci_address}: in use: {reason}")]
    InUse { pci_address: PciAddress, reason: String },
    /// The requested instance does not fit (placement occupied or invalid,
    /// profile at its maximum count).
    #[error("GPU {pci_address}: insufficient resources: {reason}")]
    InsufficientResources { pci_address: PciAddress, reason: String },
    /// The card fell off the bus or otherwise stopped answering.
    #[error("GPU {0} is lost")]
    DeviceLost(PciAddress),
    #[error("permission denied: {0}")]
    NoPermission(String),
    /// Anything else the library reported, with the call that failed.
    #[error("{call} failed: {reason}")]
    Failed { call: String, reason: String },
}
