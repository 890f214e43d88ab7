//! The backend object: a loaded NVML and the port's operations, each
//! delegating to the module that knows that area.

use std::sync::Arc;

use gpu_vendor::{
    GpuInventory, GpuProcess, HealthMonitor, HealthReading, MigInstance, MigMode, MigPlacement, MigProfile, PciAddress,
    VendorBackend, VendorError,
};
use nvml_wrapper::{Device, Nvml};

use crate::config::{DEFAULT_LIBRARY, NvidiaBackendConfig};
use crate::{errors, health, health_reading, inventory, mig_instances, mig_profiles};

/// The buffer for `nvmlSystemGetProcessName`: the header names no size; a path fits in 256 bytes.
const PROCESS_NAME_LENGTH: usize = 256;

/// NVML behind the vendor port. Cheap to share (`Arc` inside); every call
/// looks the card up by PCI address, so handles never outlive a call.
#[derive(Clone)]
pub struct NvidiaBackend {
    nvml: Arc<Nvml>,
}

impl std::fmt::Debug for NvidiaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvidiaBackend").finish_non_exhaustive()
    }
}

impl NvidiaBackend {
    /// Loads NVML and initialises it. A missing library is
    /// [`VendorError::Unavailable`], a missing driver
    /// [`VendorError::DriverNotLoaded`].
    pub fn load(config: NvidiaBackendConfig) -> Result<Self, VendorError> {
        let path = config.library_path.clone().unwrap_or_else(|| DEFAULT_LIBRARY.into());
        let nvml = Nvml::builder()
            .lib_path(path.as_os_str())
            .init()
            .map_err(errors::from_init)?;
        Ok(NvidiaBackend { nvml: Arc::new(nvml) })
    }

    fn device(&self, pci_address: &PciAddress) -> Result<Device<'_>, VendorError> {
        self.nvml
            .device_by_pci_bus_id(pci_address.to_string())
            .map_err(|e| errors::from_nvml(pci_address, "nvmlDeviceGetHandleByPciBusId_v2", e))
    }
}

impl VendorBackend for NvidiaBackend {
    fn devices(&self) -> Result<Vec<PciAddress>, VendorError> {
        inventory::pci_addresses(&self.nvml)
    }

    fn inventory(&self, pci_address: &PciAddress) -> Result<GpuInventory, VendorError> {
        inventory::read(&self.nvml, &self.device(pci_address)?, pci_address)
    }

    fn mig_profiles(&self, pci_address: &PciAddress) -> Result<Vec<MigProfile>, VendorError> {
        let device = self.device(pci_address)?;
        if mig_profiles::mode(&device, pci_address)?.is_none() {
            return Ok(Vec::new());
        }
        mig_profiles::read(&self.nvml, &device, pci_address)
    }

    fn mig_mode(&self, pci_address: &PciAddress) -> Result<Option<MigMode>, VendorError> {
        mig_profiles::mode(&self.device(pci_address)?, pci_address)
    }

    fn set_mig_mode(&self, pci_address: &PciAddress, enabled: bool) -> Result<MigMode, VendorError> {
        mig_profiles::set_mode(&self.device(pci_address)?, pci_address, enabled)
    }

    fn mig_instances(&self, pci_address: &PciAddress) -> Result<Vec<MigInstance>, VendorError> {
        mig_instances::list(&self.nvml, &self.device(pci_address)?, pci_address)
    }

    fn create_mig_device(
        &self,
        pci_address: &PciAddress,
        profile_id: u32,
        placement: MigPlacement,
    ) -> Result<MigInstance, VendorError> {
        mig_instances::create(
            &self.nvml,
            &self.device(pci_address)?,
            pci_address,
            profile_id,
            placement,
        )
    }

    fn destroy_mig_device(&self, pci_address: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError> {
        mig_instances::destroy(&self.nvml, &self.device(pci_address)?, pci_address, gpu_instance_id)
    }

    fn destroy_compute_instance(
        &self,
        pci_address: &PciAddress,
        gpu_instance_id: u32,
        compute_instance_id: u32,
    ) -> Result<(), VendorError> {
        let device = self.device(pci_address)?;
        mig_instances::destroy_compute_instance(&self.nvml, &device, pci_address, gpu_instance_id, compute_instance_id)
    }

    fn destroy_gpu_instance(&self, pci_address: &PciAddress, gpu_instance_id: u32) -> Result<(), VendorError> {
        mig_instances::destroy_gpu_instance(&self.nvml, &self.device(pci_address)?, pci_address, gpu_instance_id)
    }

    fn running_processes(&self, pci_address: &PciAddress) -> Result<Vec<GpuProcess>, VendorError> {
        let mut processes = inventory::processes(&self.device(pci_address)?, pci_address)?;
        // Names only make messages better: a process gone in between, or a library without the
        // call, leaves it unnamed.
        for process in &mut processes {
            process.name = self.nvml.sys_process_name(process.pid, PROCESS_NAME_LENGTH).ok();
        }
        Ok(processes)
    }

    fn health_monitor(&self, pci_addresses: &[PciAddress]) -> Result<Box<dyn HealthMonitor>, VendorError> {
        let monitor = health::NvidiaHealthMonitor::start(Arc::clone(&self.nvml), pci_addresses)?;
        Ok(Box::new(monitor))
    }

    fn health_reading(&self, pci_address: &PciAddress) -> Result<HealthReading, VendorError> {
        health_reading::read(&self.nvml, pci_address)
    }
}
