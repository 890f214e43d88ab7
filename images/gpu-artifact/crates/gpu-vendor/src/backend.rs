//! The port itself: the operations the handler needs from a vendor.

use crate::error::VendorError;
use crate::health::{HealthMonitor, HealthReading};
use crate::inventory::GpuInventory;
use crate::mig::{MigInstance, MigMode, MigPlacement, MigProfile};
use crate::pci_address::PciAddress;
use crate::process::GpuProcess;

/// A vendor's management library, seen through what the gpu module needs.
///
/// Calls are blocking (vendor libraries are); call them from a blocking
/// context (`tokio::task::spawn_blocking`). Every card is addressed by its
/// PCI address so that sysfs and the vendor agree on identity.
pub trait VendorBackend: Send + Sync {
    /// Every card the library sees.
    fn devices(&self) -> Result<Vec<PciAddress>, VendorError>;

    /// Identity, versions, memory, power and MIG capabilities of one card.
    fn inventory(&self, pci_address: &PciAddress) -> Result<GpuInventory, VendorError>;

    /// The MIG profiles of a MIG-capable card with their placements; an empty
    /// list for a card without MIG.
    fn mig_profiles(&self, pci_address: &PciAddress) -> Result<Vec<MigProfile>, VendorError>;

    /// `None` when the card does not support MIG.
    fn mig_mode(&self, pci_address: &PciAddress) -> Result<Option<MigMode>, VendorError>;

    /// Requests MIG on or off and returns the mode afterwards. Fails with
    /// [`VendorError::InUse`] when the change cannot be applied because the
    /// card is busy; the mode may then stay pending.
    fn set_mig_mode(&self, pci_address: &PciAddress, enabled: bool) -> Result<MigMode, VendorError>;

    /// Created MIG instances of a card (empty when MIG is off).
    fn mig_instances(&self, pci_address: &PciAddress) -> Result<Vec<MigInstance>, VendorError>;

    /// Creates a GPU instance of `profile_id` at `placement` and one compute
    /// instance spanning it: a usable MIG device. On failure nothing is left
    /// behind.
    fn create_mig_device(
        &self,
        pci_address: &PciAddress,
        profile_id: u32,
        placement: MigPlacement,
    ) -> Result<MigInstance, VendorError>;

    /// Destroys a MIG device: its compute instances first, then the GPU
    /// instance (the order the vendor requires).
    fn destroy_mig_device(&self, pci_address: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError>;

    /// Destroys one compute instance (a step of [`Self::destroy_mig_device`],
    /// exposed for reconciliation).
    fn destroy_compute_instance(
        &self,
        pci_address: &PciAddress,
        gpu_instance_id: u32,
        compute_instance_id: u32,
    ) -> Result<(), VendorError>;

    /// Destroys one GPU instance; fails with [`VendorError::InUse`] while it
    /// still has compute instances or processes.
    fn destroy_gpu_instance(&self, pci_address: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError>;

    /// Processes with a compute context on the card or its MIG instances.
    fn running_processes(&self, pci_address: &PciAddress) -> Result<Vec<GpuProcess>, VendorError>;

    /// Starts watching the given cards for health events. Events that
    /// happened before this call are not reported.
    fn health_monitor(&self, pci_addresses: &[PciAddress]) -> Result<Box<dyn HealthMonitor>, VendorError>;

    /// What the card says about its health now (memory errors, row remapping, the recovery action
    /// the driver asks for). A lost card is a reading with `lost` set, not an error.
    fn health_reading(&self, pci_address: &PciAddress) -> Result<HealthReading, VendorError>;
}
