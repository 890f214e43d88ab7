//! Compute instances inside a GPU instance: profiles, create, list, destroy.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{fill_chars, guard, lookup, out, write_array};
use crate::handles;
use crate::machine::GpuInstanceProfileSpec;
use crate::mig_rules;
use crate::rc;
use crate::session;
use crate::state::GpuInstanceState;

const CI_PROFILE_INFO_V2: c_uint = (std::mem::size_of::<nvmlComputeInstanceProfileInfo_v2_t>() as c_uint) | (2 << 24);
const CI_PROFILE_INFO_V3: c_uint = (std::mem::size_of::<nvmlComputeInstanceProfileInfo_v3_t>() as c_uint) | (3 << 24);

/// A GPU instance handle resolved to (card index, instance); stale handles
/// are `NVML_ERROR_INVALID_ARGUMENT`.
pub(super) fn resolve_gpu_instance(raw: nvmlGpuInstance_t) -> Result<(usize, GpuInstanceState), nvmlReturn_t> {
    let session = session::current()?;
    let serial = handles::gpu_instance_from_raw(raw).ok_or(rc::INVALID_ARGUMENT)?;
    session
        .store
        .read(|state| lookup::find_gpu_instance(&session, state, serial))
        .map_err(super::state_error)?
        .ok_or(rc::INVALID_ARGUMENT)
}

fn gi_profile(index: usize, gi: &GpuInstanceState) -> Result<GpuInstanceProfileSpec, nvmlReturn_t> {
    let session = session::current()?;
    let card = session.card(index)?;
    let mig = mig_rules::mig_spec(card)?;
    mig.profile_by_id(gi.profile_id).cloned().ok_or(rc::UNKNOWN)
}

/// Compute slices of the CI profile with NVML index `profile` in this GI.
fn offered_slices(gi: &GpuInstanceProfileSpec, profile: c_uint) -> Result<u32, nvmlReturn_t> {
    mig_rules::compute_slices_offered(gi.slice_count)
        .into_iter()
        .find(|&c| mig_rules::compute_profile_index(c) == Some(profile))
        .ok_or(rc::NOT_SUPPORTED)
}

/// CI profiles share the GI's engines and split its SMs by compute slice;
/// the full-size one carries the GI profile's name (`3g.20gb`), smaller ones
/// `<c>c.<gi name>` (MIG-NAMES).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceProfileInfoV(
    gpu_instance: nvmlGpuInstance_t,
    profile: c_uint,
    eng_profile: c_uint,
    info: *mut nvmlComputeInstanceProfileInfo_v2_t,
) -> nvmlReturn_t {
    guard(|| {
        let version = unsafe { out(info) }?.version;
        if version != CI_PROFILE_INFO_V2 && version != CI_PROFILE_INFO_V3 {
            return Err(rc::ARGUMENT_VERSION_MISMATCH);
        }
        let (index, gi) = resolve_gpu_instance(gpu_instance)?;
        if eng_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED {
            return Err(rc::NOT_SUPPORTED);
        }
        let spec = gi_profile(index, &gi)?;
        let slices = offered_slices(&spec, profile)?;
        let name = if slices == spec.slice_count {
            spec.name.clone()
        } else {
            format!("{slices}c.{}", spec.name)
        };
        let prefix = session::current()?.machine.profile_name_prefix.clone();
        let filled = unsafe { out(info) }?;
        filled.id = profile;
        filled.sliceCount = slices;
        filled.instanceCount = spec.slice_count / slices;
        filled.multiprocessorCount = spec.multiprocessors * slices / spec.slice_count;
        filled.sharedCopyEngineCount = spec.copy_engines;
        filled.sharedDecoderCount = spec.decoders;
        filled.sharedEncoderCount = spec.encoders;
        filled.sharedJpegCount = spec.jpeg;
        filled.sharedOfaCount = spec.ofa;
        fill_chars(&mut filled.name, &format!("{prefix}{name}"));
        if version == CI_PROFILE_INFO_V3 {
            // SAFETY: the caller declared (and so allocated) the larger v3 struct.
            unsafe { out(info.cast::<nvmlComputeInstanceProfileInfo_v3_t>()) }?.capabilities = 0;
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceCreateComputeInstance(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    compute_instance: *mut nvmlComputeInstance_t,
) -> nvmlReturn_t {
    guard(|| {
        let handle = unsafe { out(compute_instance) }?;
        let session = session::current()?;
        let gi_serial = handles::gpu_instance_from_raw(gpu_instance).ok_or(rc::INVALID_ARGUMENT)?;
        let serial = session
            .store
            .update(|state| {
                let (index, gi) = lookup::find_gpu_instance(&session, state, gi_serial).ok_or(rc::INVALID_ARGUMENT)?;
                let spec = gi_profile(index, &gi)?;
                let slices = offered_slices(&spec, profile_id).map_err(|_| rc::INVALID_ARGUMENT)?;
                let serial = state.take_serial();
                let card = &session.machine.cards[index];
                let uuid = mig_rules::mig_device_uuid(&card.uuid, serial);
                let ci = mig_rules::create_compute_instance(&gi, spec.slice_count, slices, serial, uuid)?;
                let gpu = state.gpu_mut(card);
                let stored = gpu
                    .gpu_instances
                    .iter_mut()
                    .find(|g| g.serial == gi_serial)
                    .ok_or(rc::UNKNOWN)?;
                stored.compute_instances.push(ci);
                Ok::<u64, nvmlReturn_t>(serial)
            })
            .map_err(super::state_error)??;
        *handle = handles::compute_instance_to_raw(serial);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstances(
    gpu_instance: nvmlGpuInstance_t,
    profile_id: c_uint,
    compute_instances: *mut nvmlComputeInstance_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let (_, gi) = resolve_gpu_instance(gpu_instance)?;
        let mut matching: Vec<_> = gi
            .compute_instances
            .iter()
            .filter(|ci| ci.profile_id == profile_id)
            .collect();
        matching.sort_by_key(|ci| ci.id);
        let listed: Vec<nvmlComputeInstance_t> = matching
            .iter()
            .map(|ci| handles::compute_instance_to_raw(ci.serial))
            .collect();
        unsafe { write_array(compute_instances, count, &listed) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetComputeInstanceById(
    gpu_instance: nvmlGpuInstance_t,
    id: c_uint,
    compute_instance: *mut nvmlComputeInstance_t,
) -> nvmlReturn_t {
    guard(|| {
        let (_, gi) = resolve_gpu_instance(gpu_instance)?;
        let ci = gi
            .compute_instances
            .iter()
            .find(|ci| ci.id == id)
            .ok_or(rc::NOT_FOUND)?;
        *unsafe { out(compute_instance) }? = handles::compute_instance_to_raw(ci.serial);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlComputeInstanceGetInfo_v2(
    compute_instance: nvmlComputeInstance_t,
    info: *mut nvmlComputeInstanceInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        let serial = handles::compute_instance_from_raw(compute_instance).ok_or(rc::INVALID_ARGUMENT)?;
        let (index, gi, ci) = session
            .store
            .read(|state| lookup::find_compute_instance(&session, state, serial))
            .map_err(super::state_error)?
            .ok_or(rc::INVALID_ARGUMENT)?;
        *unsafe { out(info) }? = nvmlComputeInstanceInfo_t {
            device: handles::device_to_raw(handles::DeviceHandle::Physical { index }),
            gpuInstance: handles::gpu_instance_to_raw(gi.serial),
            id: ci.id,
            profileId: ci.profile_id,
            placement: nvmlComputeInstancePlacement_t {
                start: ci.placement.start,
                size: ci.placement.size,
            },
        };
        Ok(())
    })
}

/// `NVML_ERROR_IN_USE` while processes run in the compute instance.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlComputeInstanceDestroy(compute_instance: nvmlComputeInstance_t) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        let serial = handles::compute_instance_from_raw(compute_instance).ok_or(rc::INVALID_ARGUMENT)?;
        session
            .store
            .update(|state| {
                let (index, gi, ci) =
                    lookup::find_compute_instance(&session, state, serial).ok_or(rc::INVALID_ARGUMENT)?;
                let gpu = state.gpu_mut(&session.machine.cards[index]);
                mig_rules::check_compute_instance_destroyable(gpu, &gi, &ci)?;
                for stored in gpu.gpu_instances.iter_mut().filter(|g| g.serial == gi.serial) {
                    stored.compute_instances.retain(|other| other.serial != serial);
                }
                Ok(())
            })
            .map_err(super::state_error)?
    })
}
