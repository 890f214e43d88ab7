//! MIG mode and GPU instance profiles with their placements.

use gpu_vendor::{MigEngines, MigMode, MigPlacement, MigProfile, MigState, PciAddress, VendorError};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::NVML_GPU_INSTANCE_PROFILE_COUNT;

use crate::errors::{from_nvml, from_raw};
use crate::profile_name::{derive_profile_name, strip_vendor_prefix};
use crate::raw;

fn state(mode: u32) -> MigState {
    if mode == 0 {
        MigState::Disabled
    } else {
        MigState::Enabled
    }
}

/// `None` for a card without MIG.
pub fn mode(device: &Device<'_>, pci_address: &PciAddress) -> Result<Option<MigMode>, VendorError> {
    match device.mig_mode() {
        Ok(mode) => Ok(Some(MigMode {
            current: state(mode.current),
            pending: state(mode.pending),
        })),
        Err(NvmlError::NotSupported) => Ok(None),
        Err(e) => Err(from_nvml(pci_address, "nvmlDeviceGetMigMode", e)),
    }
}

/// Sets the mode. NVML accepts the request and reports in `activationStatus`
/// whether it could be applied; a busy card leaves it pending, which is
/// [`VendorError::InUse`] here.
pub fn set_mode(device: &Device<'_>, pci_address: &PciAddress, enabled: bool) -> Result<MigMode, VendorError> {
    let activation = device
        .set_mig_mode(enabled)
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceSetMigMode", e))?;
    let wanted = if enabled { "enabled" } else { "disabled" };
    match activation {
        raw::SUCCESS => mode(device, pci_address)?.ok_or_else(|| VendorError::NotSupported {
            pci_address: *pci_address,
            what: "MIG".to_owned(),
        }),
        raw::IN_USE => Err(VendorError::InUse {
            pci_address: *pci_address,
            reason: format!("MIG mode stays pending {wanted}: the GPU is busy (processes or GPU instances)"),
        }),
        raw::RESET_REQUIRED => Err(VendorError::Failed {
            call: format!("nvmlDeviceSetMigMode on GPU {pci_address}"),
            reason: format!("MIG mode pending {wanted} needs a GPU reset the host does not allow (e.g. pass-through)"),
        }),
        other => Err(VendorError::Failed {
            call: format!("nvmlDeviceSetMigMode on GPU {pci_address}"),
            reason: format!("activation status {}", NvmlError::from(other)),
        }),
    }
}

/// Every GPU instance profile NVML reports, in NVML index order, with its
/// placements. Enumerates indices until the header's profile count, skipping
/// `NOT_SUPPORTED` and `INVALID_ARGUMENT` like NVIDIA's own drivers do.
pub fn read(nvml: &Nvml, device: &Device<'_>, pci_address: &PciAddress) -> Result<Vec<MigProfile>, VendorError> {
    let lib = nvml.lib();
    let handle = raw::device_handle(device);
    let total_mib = device
        .memory_info()
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetMemoryInfo_v2", e))?
        .total
        / (1024 * 1024);
    let mut profiles = Vec::new();
    for index in 0..NVML_GPU_INSTANCE_PROFILE_COUNT {
        let info = match raw::profiles::gpu_instance_profile(lib, handle, index) {
            Ok(info) => info,
            Err(e) if matches!(e.code(), Some(raw::NOT_SUPPORTED | raw::INVALID_ARGUMENT)) => continue,
            Err(e) => return Err(from_raw(pci_address, &format!("profile index {index}"), e)),
        };
        let name = info
            .name
            .as_deref()
            .map(strip_vendor_prefix)
            .filter(|n| !n.is_empty())
            .or_else(|| derive_profile_name(index, info.memory_mib, total_mib));
        let Some(name) = name else {
            tracing::warn!(%pci_address, index, profile_id = info.id, "MIG profile without a name is skipped");
            continue;
        };
        let placements = raw::profiles::possible_placements(lib, handle, info.id)
            .map_err(|e| from_raw(pci_address, &format!("placements of profile {name}"), e))?
            .into_iter()
            .map(|(start, size)| MigPlacement { start, size })
            .collect();
        profiles.push(MigProfile {
            id: info.id,
            name,
            memory_mib: info.memory_mib,
            slice_count: info.slice_count,
            max_instances: info.instance_count,
            engines: MigEngines {
                multiprocessors: info.multiprocessors,
                copy_engines: info.copy_engines,
                decoders: info.decoders,
                encoders: info.encoders,
                jpeg_engines: info.jpeg,
                ofa_engines: info.ofa,
            },
            placements,
        });
    }
    Ok(profiles)
}
