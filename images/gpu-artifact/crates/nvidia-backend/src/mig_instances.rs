//! MIG instance lifecycle: list, create (GPU instance + full compute
//! instance), destroy (compute instances first, as NVML requires).

use gpu_vendor::{MigInstance, MigPlacement, MigProfile, PciAddress, VendorError};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{NVML_COMPUTE_INSTANCE_PROFILE_COUNT, NvmlLib, nvmlGpuInstance_t};

use crate::errors::{from_nvml, from_raw};
use crate::raw::{self, RawError};
use crate::{mig_profiles, raw::instances};

/// A MIG device as NVML enumerates it under its parent.
struct MigDevice {
    gpu_instance_id: u32,
    compute_instance_id: u32,
    uuid: String,
}

fn mig_devices(nvml: &Nvml, device: &Device<'_>, pci_address: &PciAddress) -> Result<Vec<MigDevice>, VendorError> {
    let max = device
        .mig_device_count()
        .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetMaxMigDeviceCount", e))?;
    let mut found = Vec::new();
    for index in 0..max {
        let mig = match device.mig_device_by_index(index) {
            Ok(mig) => mig,
            Err(NvmlError::NotFound) => continue,
            Err(e) => return Err(from_nvml(pci_address, "nvmlDeviceGetMigDeviceHandleByIndex", e)),
        };
        let (gpu_instance_id, compute_instance_id) = instances::mig_device_ids(nvml.lib(), raw::device_handle(&mig))
            .map_err(|e| from_raw(pci_address, "MIG device ids", e))?;
        let uuid = mig
            .uuid()
            .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetUUID (MIG)", e))?;
        found.push(MigDevice {
            gpu_instance_id,
            compute_instance_id,
            uuid,
        });
    }
    Ok(found)
}

/// Every GPU instance, one entry per compute instance (or one without
/// compute instance when it has none). Empty while MIG is disabled.
pub fn list(nvml: &Nvml, device: &Device<'_>, pci_address: &PciAddress) -> Result<Vec<MigInstance>, VendorError> {
    match mig_profiles::mode(device, pci_address)? {
        Some(mode) if mode.current.is_enabled() => {}
        _ => return Ok(Vec::new()),
    }
    let profiles = mig_profiles::read(nvml, device, pci_address)?;
    let migs = mig_devices(nvml, device, pci_address)?;
    let handle = raw::device_handle(device);
    let mut listed = Vec::new();
    for profile in &profiles {
        let gpu_instances = instances::gpu_instances(nvml.lib(), handle, profile.id, profile.max_instances)
            .map_err(|e| from_raw(pci_address, &format!("GPU instances of profile {}", profile.name), e))?;
        for gi in gpu_instances {
            let entry = |ci: Option<&MigDevice>| MigInstance {
                gpu_instance_id: gi.id,
                compute_instance_id: ci.map(|m| m.compute_instance_id),
                profile_id: profile.id,
                profile_name: profile.name.clone(),
                placement: MigPlacement {
                    start: gi.start,
                    size: gi.size,
                },
                uuid: ci.map(|m| m.uuid.clone()),
            };
            let cis: Vec<&MigDevice> = migs.iter().filter(|m| m.gpu_instance_id == gi.id).collect();
            if cis.is_empty() {
                listed.push(entry(None));
            }
            listed.extend(cis.into_iter().map(|ci| entry(Some(ci))));
        }
    }
    listed.sort_by_key(|i| (i.gpu_instance_id, i.compute_instance_id));
    Ok(listed)
}

/// Creates the GPU instance, then one compute instance spanning it; if the
/// compute instance fails the GPU instance is destroyed again.
pub fn create(
    nvml: &Nvml,
    device: &Device<'_>,
    pci_address: &PciAddress,
    profile_id: u32,
    placement: MigPlacement,
) -> Result<MigInstance, VendorError> {
    let lib = nvml.lib();
    let handle = raw::device_handle(device);
    let profiles = mig_profiles::read(nvml, device, pci_address)?;
    let profile = profiles
        .iter()
        .find(|p| p.id == profile_id)
        .ok_or_else(|| VendorError::NotSupported {
            pci_address: *pci_address,
            what: format!("MIG profile id {profile_id}"),
        })?;
    let what = format!(
        "profile {} at placement {}:{}",
        profile.name, placement.start, placement.size
    );
    let gi = instances::create_gpu_instance(lib, handle, profile_id, placement.start, placement.size)
        .map_err(|e| from_raw(pci_address, &format!("create GPU instance of {what}"), e))?;
    let created = instances::gpu_instance_info(lib, gi).and_then(|info| {
        let ci_profile = full_compute_profile(lib, gi, profile)?;
        let ci = instances::create_compute_instance(lib, gi, ci_profile.id)?;
        Ok((info, instances::compute_instance_id(lib, ci)?))
    });
    let (info, compute_instance_id) = match created {
        Ok(created) => created,
        Err(e) => {
            if let Err(undo) = instances::destroy_gpu_instance(lib, gi) {
                tracing::error!(%pci_address, ?undo, "could not destroy the GPU instance of a failed MIG device");
            }
            return Err(from_raw(pci_address, &format!("create compute instance of {what}"), e));
        }
    };
    let uuid = mig_devices(nvml, device, pci_address)?
        .into_iter()
        .find(|m| m.gpu_instance_id == info.id && m.compute_instance_id == compute_instance_id)
        .map(|m| m.uuid);
    Ok(MigInstance {
        gpu_instance_id: info.id,
        compute_instance_id: Some(compute_instance_id),
        profile_id,
        profile_name: profile.name.clone(),
        placement: MigPlacement {
            start: info.start,
            size: info.size,
        },
        uuid,
    })
}

/// The compute instance profile that spans the whole GPU instance.
fn full_compute_profile(
    lib: &NvmlLib,
    gi: nvmlGpuInstance_t,
    profile: &MigProfile,
) -> Result<instances::RawComputeProfile, RawError> {
    let mut last_error = None;
    for index in 0..NVML_COMPUTE_INSTANCE_PROFILE_COUNT {
        match instances::compute_profile(lib, gi, index) {
            Ok(ci) if ci.slice_count == profile.slice_count => return Ok(ci),
            Ok(_) => {}
            Err(e) if matches!(e.code(), Some(raw::NOT_SUPPORTED | raw::INVALID_ARGUMENT)) => last_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last_error.unwrap_or(RawError::Code {
        call: "nvmlGpuInstanceGetComputeInstanceProfileInfoV",
        code: raw::NOT_SUPPORTED,
    }))
}

fn gpu_instance(
    lib: &NvmlLib,
    device: &Device<'_>,
    pci_address: &PciAddress,
    gpu_instance_id: u32,
) -> Result<nvmlGpuInstance_t, VendorError> {
    instances::gpu_instance_by_id(lib, raw::device_handle(device), gpu_instance_id).map_err(|e| match e.code() {
        Some(raw::NOT_FOUND) | Some(raw::NOT_SUPPORTED) => VendorError::InstanceNotFound {
            pci_address: *pci_address,
            gpu_instance_id,
            compute_instance_id: None,
        },
        _ => from_raw(pci_address, &format!("GPU instance {gpu_instance_id}"), e),
    })
}

/// Compute instances of a GPU instance as `(id, handle)`.
fn compute_instances(
    lib: &NvmlLib,
    gi: nvmlGpuInstance_t,
) -> Result<Vec<(u32, nvml_wrapper_sys::bindings::nvmlComputeInstance_t)>, RawError> {
    let mut found = Vec::new();
    for index in 0..NVML_COMPUTE_INSTANCE_PROFILE_COUNT {
        let profile = match instances::compute_profile(lib, gi, index) {
            Ok(profile) => profile,
            Err(e) if matches!(e.code(), Some(raw::NOT_SUPPORTED | raw::INVALID_ARGUMENT)) => continue,
            Err(e) => return Err(e),
        };
        // At most 8 compute slices per GPU instance, so at most 8 instances.
        for ci in instances::compute_instances(lib, gi, profile.id, 8)? {
            found.push((instances::compute_instance_id(lib, ci)?, ci));
        }
    }
    Ok(found)
}

pub fn destroy(
    nvml: &Nvml,
    device: &Device<'_>,
    pci_address: &PciAddress,
    gpu_instance_id: u32,
) -> Result<(), VendorError> {
    let lib = nvml.lib();
    let gi = gpu_instance(lib, device, pci_address, gpu_instance_id)?;
    let what = format!("GPU instance {gpu_instance_id}");
    for (id, ci) in compute_instances(lib, gi).map_err(|e| from_raw(pci_address, &what, e))? {
        instances::destroy_compute_instance(lib, ci)
            .map_err(|e| from_raw(pci_address, &format!("destroy compute instance {id} of {what}"), e))?;
    }
    instances::destroy_gpu_instance(lib, gi).map_err(|e| from_raw(pci_address, &format!("destroy {what}"), e))
}

pub fn destroy_compute_instance(
    nvml: &Nvml,
    device: &Device<'_>,
    pci_address: &PciAddress,
    gpu_instance_id: u32,
    compute_instance_id: u32,
) -> Result<(), VendorError> {
    let lib = nvml.lib();
    let gi = gpu_instance(lib, device, pci_address, gpu_instance_id)?;
    let what = format!("compute instance {compute_instance_id} of GPU instance {gpu_instance_id}");
    let (_, ci) = compute_instances(lib, gi)
        .map_err(|e| from_raw(pci_address, &what, e))?
        .into_iter()
        .find(|(id, _)| *id == compute_instance_id)
        .ok_or(VendorError::InstanceNotFound {
            pci_address: *pci_address,
            gpu_instance_id,
            compute_instance_id: Some(compute_instance_id),
        })?;
    instances::destroy_compute_instance(lib, ci).map_err(|e| from_raw(pci_address, &format!("destroy {what}"), e))
}

pub fn destroy_gpu_instance(
    nvml: &Nvml,
    device: &Device<'_>,
    pci_address: &PciAddress,
    gpu_instance_id: u32,
) -> Result<(), VendorError> {
    let lib = nvml.lib();
    let gi = gpu_instance(lib, device, pci_address, gpu_instance_id)?;
    instances::destroy_gpu_instance(lib, gi).map_err(|e| {
        from_raw(
            pci_address,
            &format!("destroy GPU instance {gpu_instance_id} (its compute instances must go first)"),
            e,
        )
    })
}
