//! The vendor port: what the gpu module needs from a GPU vendor's management
//! library, as plain types and one trait ([`VendorBackend`]).
//!
//! It covers inventory and capabilities, MIG profiles with their placements,
//! the MIG instance lifecycle, running processes (to decide that a card is
//! free) and health events. NVIDIA implements it today (`nvidia-backend`);
//! AMD and Intel must fit later without touching these types.
//!
//! This crate must never do I/O, load a library or know a vendor's API: it is
//! the vocabulary the handler and the vendor adapters share, and nothing more.

mod backend;
mod error;
mod health;
mod inventory;
mod mig;
mod pci_address;
mod process;

pub use backend::VendorBackend;
pub use error::VendorError;
pub use health::{HealthEvent, HealthEventKind, HealthMonitor, HealthReading, RecoveryAction, RemappedRows};
pub use inventory::{ComputeCapability, GpuInventory, PowerLimits};
pub use mig::{MigCapabilities, MigEngines, MigInstance, MigMode, MigPlacement, MigProfile, MigState};
pub use pci_address::{PciAddress, PciAddressError};
pub use process::GpuProcess;
