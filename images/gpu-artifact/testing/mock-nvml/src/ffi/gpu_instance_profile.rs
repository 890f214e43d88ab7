//! GPU instance profiles: profile info (v1 and versioned) and placements.
//!
//! Profile info follows the header: the v1 call answers whatever the MIG
//! mode, the versioned `...ProfileInfoV` only while MIG is enabled
//! (`NVML_ERROR_NOT_SUPPORTED` otherwise), and placements are listed
//! "regardless of whether MIG is enabled or not".

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::lookup::{self, DeviceRef};
use super::{fill_chars, guard, out, write_array};
use crate::machine::GpuInstanceProfileSpec;
use crate::mig_rules::{self, mig_spec};
use crate::rc;

/// `NVML_GPU_INSTANCE_PROFILE_COUNT` of the NVML 13.3 header: indices at or
/// past it are `NVML_ERROR_INVALID_ARGUMENT`, below it but absent from the
/// card's table `NVML_ERROR_NOT_SUPPORTED`.
const PROFILE_INDEX_COUNT: c_uint = 0x12;
const PROFILE_INFO_V2: c_uint = (std::mem::size_of::<nvmlGpuInstanceProfileInfo_v2_t>() as c_uint) | (2 << 24);
const PROFILE_INFO_V3: c_uint = (std::mem::size_of::<nvmlGpuInstanceProfileInfo_v3_t>() as c_uint) | (3 << 24);

fn profile_by_index(device: &DeviceRef, index: c_uint) -> Result<GpuInstanceProfileSpec, nvmlReturn_t> {
    if index >= PROFILE_INDEX_COUNT {
        return Err(rc::INVALID_ARGUMENT);
    }
    let mig = mig_spec(device.card())?;
    mig.profile_by_index(index).cloned().ok_or(rc::NOT_SUPPORTED)
}

pub(super) fn profile_by_id(device: &DeviceRef, id: c_uint) -> Result<GpuInstanceProfileSpec, nvmlReturn_t> {
    let mig = mig_spec(device.card())?;
    mig.profile_by_id(id).cloned().ok_or(rc::INVALID_ARGUMENT)
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfo(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let spec = profile_by_index(&device, profile)?;
        *unsafe { out(info) }? = nvmlGpuInstanceProfileInfo_t {
            id: spec.id,
            isP2pSupported: c_uint::from(spec.p2p),
            sliceCount: spec.slice_count,
            instanceCount: spec.max_instances,
            multiprocessorCount: spec.multiprocessors,
            copyEngineCount: spec.copy_engines,
            decoderCount: spec.decoders,
            encoderCount: spec.encoders,
            jpegCount: spec.jpeg,
            ofaCount: spec.ofa,
            memorySizeMB: spec.memory_mib,
        };
        Ok(())
    })
}

/// Fills a v2 or v3 struct, chosen by the `version` the caller set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceProfileInfoV(
    device: nvmlDevice_t,
    profile: c_uint,
    info: *mut nvmlGpuInstanceProfileInfo_v2_t,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let version = unsafe { out(info) }?.version;
        if version != PROFILE_INFO_V2 && version != PROFILE_INFO_V3 {
            return Err(rc::ARGUMENT_VERSION_MISMATCH);
        }
        let spec = profile_by_index(&device, profile)?;
        let card = device.card().clone();
        let enabled = device
            .session
            .store
            .read(|s| s.gpu(&card).mig_current)
            .map_err(super::state_error)?;
        if !enabled {
            return Err(rc::NOT_SUPPORTED);
        }
        let name = format!("{}{}", device.session.machine.profile_name_prefix, spec.name);
        if version == PROFILE_INFO_V3 {
            // SAFETY: v2 and v3 have the same size; the caller declared v3.
            let v3 = unsafe { out(info.cast::<nvmlGpuInstanceProfileInfo_v3_t>()) }?;
            v3.id = spec.id;
            v3.sliceCount = spec.slice_count;
            v3.instanceCount = spec.max_instances;
            v3.multiprocessorCount = spec.multiprocessors;
            v3.copyEngineCount = spec.copy_engines;
            v3.decoderCount = spec.decoders;
            v3.encoderCount = spec.encoders;
            v3.jpegCount = spec.jpeg;
            v3.ofaCount = spec.ofa;
            v3.memorySizeMB = spec.memory_mib;
            fill_chars(&mut v3.name, &name);
            v3.capabilities = if spec.p2p {
                NVML_GPU_INSTANCE_PROFILE_CAPS_P2P
            } else {
                0
            };
        } else {
            let v2 = unsafe { out(info) }?;
            v2.id = spec.id;
            v2.isP2pSupported = c_uint::from(spec.p2p);
            v2.sliceCount = spec.slice_count;
            v2.instanceCount = spec.max_instances;
            v2.multiprocessorCount = spec.multiprocessors;
            v2.copyEngineCount = spec.copy_engines;
            v2.decoderCount = spec.decoders;
            v2.encoderCount = spec.encoders;
            v2.jpegCount = spec.jpeg;
            v2.ofaCount = spec.ofa;
            v2.memorySizeMB = spec.memory_mib;
            fill_chars(&mut v2.name, &name);
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstancePossiblePlacements_v2(
    device: nvmlDevice_t,
    profile_id: c_uint,
    placements: *mut nvmlGpuInstancePlacement_t,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let spec = profile_by_id(&device, profile_id)?;
        let listed: Vec<nvmlGpuInstancePlacement_t> = mig_rules::possible_placements(&spec)
            .into_iter()
            .map(|p| nvmlGpuInstancePlacement_t {
                start: p.start,
                size: p.size,
            })
            .collect();
        if placements.is_null() {
            // "placements may be NULL to query count" (NVML header).
            *unsafe { out(count) }? = listed.len() as c_uint;
            return Ok(());
        }
        unsafe { write_array(placements, count, &listed) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetGpuInstanceRemainingCapacity(
    device: nvmlDevice_t,
    profile_id: c_uint,
    count: *mut c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let spec = profile_by_id(&device, profile_id)?;
        let card = device.card().clone();
        let gpu = device
            .session
            .store
            .read(|s| s.gpu(&card))
            .map_err(super::state_error)?;
        *unsafe { out(count) }? = mig_rules::remaining_capacity(&card, &gpu, &spec);
        Ok(())
    })
}
