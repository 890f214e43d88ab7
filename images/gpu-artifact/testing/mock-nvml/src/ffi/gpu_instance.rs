//! GPU instances: create, list, look up, destroy.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::gpu_instance_profile::profile_by_id;
use super::lookup;
use super::{guard, input, out, write_array};
use crate::handles;
use crate::mig_rules::{self, mig_spec};
use crate::rc;
use crate::state::Placement;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstance(
    device: nvmlDevice_t,
    profile_id: c_uint,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    guard(|| create(device, profile_id, None, gpu_instance))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceCreateGpuInstanceWithPlacement(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placement: *const nvmlGpuInstancePlacement_t,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    guard(|| {
        let wanted = unsafe { input(placement) }?;
        let wanted = Placement {
            start: wanted.start,
            size: wanted.size,
        };
        create(device, profile_id, Some(wanted), gpu_instance)
    })
}

fn create(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placement: Option<Placement>,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> Result<(), nvmlReturn_t> {
    let device = lookup::physical_device(device)?;
    let handle = unsafe { out(gpu_instance) }?;
    let card = device.card().clone();
    let serial = device
        .session
        .store
        .update(|state| {
            let serial = state.take_serial();
            let gpu = state.gpu_mut(&card);
            let gi = mig_rules::create_gpu_instance(&card, gpu, profile_id, placement, serial)?;
            gpu.gpu_instances.push(gi);
            Ok::<u64, nvmlReturn_t>(serial)
        })
        .map_err(super::state_error)??;
    *handle = handles::gpu_instance_to_raw(serial);
    Ok(())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstances(
    device: nvmlDevice_t,
    profile_id: c_uint,
    gpu_instances: *mut nvmlGpuInstance_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        profile_by_id(&device, profile_id)?;
        let card = device.card().clone();
        let gpu = device
            .session
            .store
            .read(|s| s.gpu(&card))
            .map_err(super::state_error)?;
        if !gpu.mig_current {
            return Err(rc::NOT_SUPPORTED);
        }
        let mut matching: Vec<_> = gpu
            .gpu_instances
            .iter()
            .filter(|gi| gi.profile_id == profile_id)
            .collect();
        matching.sort_by_key(|gi| gi.id);
        let listed: Vec<nvmlGpuInstance_t> = matching
            .iter()
            .map(|gi| handles::gpu_instance_to_raw(gi.serial))
            .collect();
        unsafe { write_array(gpu_instances, count, &listed) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceById(
    device: nvmlDevice_t,
    id: c_uint,
    gpu_instance: *mut nvmlGpuInstance_t,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let card = device.card().clone();
        mig_spec(&card)?;
        let gpu = device
            .session
            .store
            .read(|s| s.gpu(&card))
            .map_err(super::state_error)?;
        if !gpu.mig_current {
            return Err(rc::NOT_SUPPORTED);
        }
        let gi = gpu.gpu_instances.iter().find(|gi| gi.id == id).ok_or(rc::NOT_FOUND)?;
        *unsafe { out(gpu_instance) }? = handles::gpu_instance_to_raw(gi.serial);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceGetInfo(
    gpu_instance: nvmlGpuInstance_t,
    info: *mut nvmlGpuInstanceInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let (index, gi) = super::compute_instance::resolve_gpu_instance(gpu_instance)?;
        *unsafe { out(info) }? = nvmlGpuInstanceInfo_t {
            device: handles::device_to_raw(handles::DeviceHandle::Physical { index }),
            id: gi.id,
            profileId: gi.profile_id,
            placement: nvmlGpuInstancePlacement_t {
                start: gi.placement.start,
                size: gi.placement.size,
            },
        };
        Ok(())
    })
}

/// `NVML_ERROR_IN_USE` while compute instances or processes remain.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlGpuInstanceDestroy(gpu_instance: nvmlGpuInstance_t) -> nvmlReturn_t {
    guard(|| {
        let session = crate::session::current()?;
        let serial = handles::gpu_instance_from_raw(gpu_instance).ok_or(rc::INVALID_ARGUMENT)?;
        session
            .store
            .update(|state| {
                let (index, gi) = lookup::find_gpu_instance(&session, state, serial).ok_or(rc::INVALID_ARGUMENT)?;
                let gpu = state.gpu_mut(&session.machine.cards[index]);
                mig_rules::check_gpu_instance_destroyable(gpu, &gi)?;
                gpu.gpu_instances.retain(|other| other.serial != serial);
                Ok(())
            })
            .map_err(super::state_error)?
    })
}
