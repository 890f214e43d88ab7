//! MIG mode and MIG device handles.
//!
//! Mode changes follow real A100/H100 on bare metal: a set records the
//! pending mode; it is applied at once (current = pending) when the card is
//! idle, which is what the driver's automatic GPU reset achieves. When
//! processes run, a client holds the card open without a context (DCGM's
//! nv-hostengine: NVML does not list it), or MIG would be turned off while GPU
//! instances exist, the call succeeds but `activationStatus` is
//! `NVML_ERROR_IN_USE` and the mode stays pending ("MIG mode is in pending
//! enable state ... In use by another client"); the next set on an idle card
//! applies it.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{guard, lookup, out};
use crate::handles::{self, DeviceHandle};
use crate::mig_rules::mig_spec;
use crate::rc;
use crate::state::GpuState;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigMode(
    device: nvmlDevice_t,
    current_mode: *mut c_uint,
    pending_mode: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let card = device.card().clone();
        mig_spec(&card)?;
        let gpu = device
            .session
            .store
            .read(|state| state.gpu(&card))
            .map_err(super::state_error)?;
        *unsafe { out(current_mode) }? = c_uint::from(gpu.mig_current);
        *unsafe { out(pending_mode) }? = c_uint::from(gpu.mig_pending);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceSetMigMode(
    device: nvmlDevice_t,
    mode: c_uint,
    activation_status: *mut nvmlReturn_t,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let card = device.card().clone();
        mig_spec(&card)?;
        let enable = match mode {
            NVML_DEVICE_MIG_DISABLE => false,
            NVML_DEVICE_MIG_ENABLE => true,
            _ => return Err(rc::INVALID_ARGUMENT),
        };
        let status = unsafe { out(activation_status) }?;
        *status = device
            .session
            .store
            .update(|state| apply_mode(state.gpu_mut(&card), enable))
            .map_err(super::state_error)?;
        Ok(())
    })
}

fn apply_mode(gpu: &mut GpuState, enable: bool) -> nvmlReturn_t {
    gpu.mig_pending = enable;
    if gpu.mig_current == enable {
        return rc::SUCCESS;
    }
    let busy = !gpu.processes.is_empty() || !gpu.clients.is_empty() || (!enable && !gpu.gpu_instances.is_empty());
    if busy {
        return rc::IN_USE;
    }
    gpu.mig_current = enable;
    rc::SUCCESS
}

/// The number of compute slices when MIG is on, zero otherwise (NVML:
/// "Returns zero if MIG is not supported or enabled").
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMaxMigDeviceCount(device: nvmlDevice_t, count: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let card = device.card().clone();
        let enabled = device
            .session
            .store
            .read(|s| s.gpu(&card).mig_current)
            .map_err(super::state_error)?;
        let max = match &card.model.mig {
            Some(mig) if enabled => mig.compute_slices,
            _ => 0,
        };
        *unsafe { out(count) }? = max;
        Ok(())
    })
}

/// MIG devices (compute instances) in GPU instance id, then compute
/// instance id order; `NVML_ERROR_NOT_FOUND` past the last one.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMigDeviceHandleByIndex(
    device: nvmlDevice_t,
    index: c_uint,
    mig_device: *mut nvmlDevice_t,
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
        let mut gis = gpu.gpu_instances.clone();
        gis.sort_by_key(|gi| gi.id);
        let machine = &device.session.machine;
        let mut serials = gis.iter().flat_map(|gi| {
            let mut cis = gi.compute_instances.clone();
            cis.sort_by_key(|ci| ci.id);
            cis.into_iter()
                .filter(|ci| machine.mig_device_visible(&card, gi.id, ci.id))
                .map(|ci| ci.serial)
        });
        let serial = serials.nth(index as usize).ok_or(rc::NOT_FOUND)?;
        *unsafe { out(mig_device) }? = handles::device_to_raw(DeviceHandle::Mig {
            compute_instance_serial: serial,
        });
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(device: nvmlDevice_t, is_mig_device: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        *unsafe { out(is_mig_device) }? = c_uint::from(device.mig.is_some());
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        let (gi, _) = device.mig.as_ref().ok_or(rc::NOT_SUPPORTED)?;
        *unsafe { out(id) }? = gi.id;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeInstanceId(device: nvmlDevice_t, id: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        let (_, ci) = device.mig.as_ref().ok_or(rc::NOT_SUPPORTED)?;
        *unsafe { out(id) }? = ci.id;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig_device: nvmlDevice_t,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let mig = lookup::device(mig_device)?;
        if mig.mig.is_none() {
            return Err(rc::INVALID_ARGUMENT);
        }
        *unsafe { out(device) }? = handles::device_to_raw(DeviceHandle::Physical { index: mig.index });
        Ok(())
    })
}
