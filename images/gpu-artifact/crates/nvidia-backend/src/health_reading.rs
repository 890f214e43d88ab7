//! What a card says about its health when asked: uncorrectable memory errors (volatile counter:
//! since the driver loaded or the card was reset), row remapping, and the recovery action the
//! driver asks for (NVML field 230, drivers from R550 on). A query the card or driver does not
//! answer is left `None`; a lost card is a reading with `lost` set.

use gpu_vendor::{HealthReading, PciAddress, RecoveryAction, VendorError};
use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::FieldValueSample;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::field_id::NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;

use crate::errors::{from_nvml, from_raw};
use crate::inventory::optional;
use crate::raw;

pub fn read(nvml: &Nvml, pci_address: &PciAddress) -> Result<HealthReading, VendorError> {
    let device = match nvml.device_by_pci_bus_id(pci_address.to_string()) {
        Ok(device) => device,
        Err(NvmlError::GpuLost) => return Ok(HealthReading::lost()),
        Err(e) => return Err(from_nvml(pci_address, "nvmlDeviceGetHandleByPciBusId_v2", e)),
    };
    match query(nvml, &device, pci_address) {
        Err(VendorError::DeviceLost(_)) => Ok(HealthReading::lost()),
        other => other,
    }
}

fn query(nvml: &Nvml, device: &Device<'_>, pci_address: &PciAddress) -> Result<HealthReading, VendorError> {
    let uncorrectable_memory_errors = optional(
        pci_address,
        "nvmlDeviceGetTotalEccErrors",
        device.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile),
    )?;
    let remapped_rows = match raw::remapped_rows::remapped_rows(nvml, raw::device_handle(device)) {
        Ok(rows) => Some(rows),
        Err(e) if e.code().is_none() || e.code() == Some(raw::NOT_SUPPORTED) => None,
        Err(e) => return Err(from_raw(pci_address, "row remapping", e)),
    };
    Ok(HealthReading {
        lost: false,
        uncorrectable_memory_errors,
        remapped_rows,
        recovery_action: recovery_action(device, pci_address)?,
    })
}

/// The recovery action field; `None` where the driver predates it or the card lacks it.
fn recovery_action(device: &Device<'_>, pci_address: &PciAddress) -> Result<Option<RecoveryAction>, VendorError> {
    let field = FieldId(NVML_FI_DEV_GET_GPU_RECOVERY_ACTION);
    let samples = optional(
        pci_address,
        "nvmlDeviceGetFieldValues",
        device.field_values_for(&[field]),
    )?;
    let Some(sample) = samples.into_iter().flatten().next() else {
        return Ok(None);
    };
    let FieldValueSample { value, .. } = sample.map_err(|e| from_nvml(pci_address, "recovery action field", e))?;
    let value = match value {
        Ok(value) => value,
        Err(NvmlError::NotSupported) => return Ok(None),
        Err(e) => return Err(from_nvml(pci_address, "recovery action field", e)),
    };
    let number = match value {
        SampleValue::U32(v) => u64::from(v),
        SampleValue::U64(v) => v,
        SampleValue::I64(v) => v.max(0) as u64,
        SampleValue::F64(v) => v.max(0.0) as u64,
    };
    Ok(Some(RecoveryAction::from_nvml(
        u32::try_from(number).unwrap_or(u32::MAX),
    )))
}
