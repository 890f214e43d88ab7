//! GPU and compute instance lifecycle, and the ids behind MIG device handles.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{RawError, check, struct_version, symbol};

/// A GPU instance as `nvmlGpuInstanceGetInfo` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawGpuInstance {
    pub handle: nvmlGpuInstance_t,
    pub id: u32,
    pub profile_id: u32,
    pub start: u32,
    pub size: u32,
}

/// GPU instances of one profile (`capacity` = the profile's max instances).
pub fn gpu_instances(
    lib: &NvmlLib,
    device: nvmlDevice_t,
    profile_id: u32,
    capacity: u32,
) -> Result<Vec<RawGpuInstance>, RawError> {
    const CALL: &str = "nvmlDeviceGetGpuInstances";
    let function = symbol(CALL, &lib.nvmlDeviceGetGpuInstances)?;
    let mut handles: Vec<nvmlGpuInstance_t> = vec![std::ptr::null_mut(); capacity.max(1) as usize];
    let mut count = handles.len() as c_uint;
    // SAFETY: `handles` holds `count` entries.
    check(CALL, unsafe {
        function(device, profile_id, handles.as_mut_ptr(), &mut count)
    })?;
    handles.truncate(count as usize);
    handles
        .into_iter()
        .map(|handle| gpu_instance_info(lib, handle))
        .collect()
}

pub fn gpu_instance_info(lib: &NvmlLib, handle: nvmlGpuInstance_t) -> Result<RawGpuInstance, RawError> {
    const CALL: &str = "nvmlGpuInstanceGetInfo";
    let function = symbol(CALL, &lib.nvmlGpuInstanceGetInfo)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuInstanceInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-struct and a handle NVML gave us.
    check(CALL, unsafe { function(handle, &mut info) })?;
    Ok(RawGpuInstance {
        handle,
        id: info.id,
        profile_id: info.profileId,
        start: info.placement.start,
        size: info.placement.size,
    })
}

pub fn gpu_instance_by_id(lib: &NvmlLib, device: nvmlDevice_t, id: u32) -> Result<nvmlGpuInstance_t, RawError> {
    const CALL: &str = "nvmlDeviceGetGpuInstanceById";
    let function = symbol(CALL, &lib.nvmlDeviceGetGpuInstanceById)?;
    let mut handle: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check(CALL, unsafe { function(device, id, &mut handle) })?;
    Ok(handle)
}

pub fn create_gpu_instance(
    lib: &NvmlLib,
    device: nvmlDevice_t,
    profile_id: u32,
    start: u32,
    size: u32,
) -> Result<nvmlGpuInstance_t, RawError> {
    const CALL: &str = "nvmlDeviceCreateGpuInstanceWithPlacement";
    let function = symbol(CALL, &lib.nvmlDeviceCreateGpuInstanceWithPlacement)?;
    let placement = nvmlGpuInstancePlacement_t { start, size };
    let mut handle: nvmlGpuInstance_t = std::ptr::null_mut();
    // SAFETY: valid in and out pointers.
    check(CALL, unsafe { function(device, profile_id, &placement, &mut handle) })?;
    Ok(handle)
}

pub fn destroy_gpu_instance(lib: &NvmlLib, handle: nvmlGpuInstance_t) -> Result<(), RawError> {
    const CALL: &str = "nvmlGpuInstanceDestroy";
    let function = symbol(CALL, &lib.nvmlGpuInstanceDestroy)?;
    // SAFETY: a handle NVML gave us.
    check(CALL, unsafe { function(handle) })
}

/// A compute instance profile of a GPU instance: its id and compute slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawComputeProfile {
    pub id: u32,
    pub slice_count: u32,
}

/// The compute instance profile with `NVML_COMPUTE_INSTANCE_PROFILE_*`
/// `index`, shared engines (the only engine profile NVML defines).
pub fn compute_profile(
    lib: &NvmlLib,
    gpu_instance: nvmlGpuInstance_t,
    index: u32,
) -> Result<RawComputeProfile, RawError> {
    const CALL: &str = "nvmlGpuInstanceGetComputeInstanceProfileInfoV";
    let function = symbol(CALL, &lib.nvmlGpuInstanceGetComputeInstanceProfileInfoV)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlComputeInstanceProfileInfo_v2_t = unsafe { std::mem::zeroed() };
    info.version = struct_version::<nvmlComputeInstanceProfileInfo_v2_t>(2);
    let shared = NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED;
    // SAFETY: a valid, versioned out-struct.
    check(CALL, unsafe { function(gpu_instance, index, shared, &mut info) })?;
    Ok(RawComputeProfile {
        id: info.id,
        slice_count: info.sliceCount,
    })
}

pub fn create_compute_instance(
    lib: &NvmlLib,
    gpu_instance: nvmlGpuInstance_t,
    profile_id: u32,
) -> Result<nvmlComputeInstance_t, RawError> {
    const CALL: &str = "nvmlGpuInstanceCreateComputeInstance";
    let function = symbol(CALL, &lib.nvmlGpuInstanceCreateComputeInstance)?;
    let mut handle: nvmlComputeInstance_t = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    check(CALL, unsafe { function(gpu_instance, profile_id, &mut handle) })?;
    Ok(handle)
}

/// The id of a compute instance.
pub fn compute_instance_id(lib: &NvmlLib, handle: nvmlComputeInstance_t) -> Result<u32, RawError> {
    const CALL: &str = "nvmlComputeInstanceGetInfo_v2";
    let function = symbol(CALL, &lib.nvmlComputeInstanceGetInfo_v2)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlComputeInstanceInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-struct.
    check(CALL, unsafe { function(handle, &mut info) })?;
    Ok(info.id)
}

/// Compute instances of one CI profile in a GPU instance.
pub fn compute_instances(
    lib: &NvmlLib,
    gpu_instance: nvmlGpuInstance_t,
    profile_id: u32,
    capacity: u32,
) -> Result<Vec<nvmlComputeInstance_t>, RawError> {
    const CALL: &str = "nvmlGpuInstanceGetComputeInstances";
    let function = symbol(CALL, &lib.nvmlGpuInstanceGetComputeInstances)?;
    let mut handles: Vec<nvmlComputeInstance_t> = vec![std::ptr::null_mut(); capacity.max(1) as usize];
    let mut count = handles.len() as c_uint;
    // SAFETY: `handles` holds `count` entries.
    check(CALL, unsafe {
        function(gpu_instance, profile_id, handles.as_mut_ptr(), &mut count)
    })?;
    handles.truncate(count as usize);
    Ok(handles)
}

pub fn destroy_compute_instance(lib: &NvmlLib, handle: nvmlComputeInstance_t) -> Result<(), RawError> {
    const CALL: &str = "nvmlComputeInstanceDestroy";
    let function = symbol(CALL, &lib.nvmlComputeInstanceDestroy)?;
    // SAFETY: a handle NVML gave us.
    check(CALL, unsafe { function(handle) })
}

/// GPU and compute instance ids of a MIG device handle.
pub fn mig_device_ids(lib: &NvmlLib, mig_device: nvmlDevice_t) -> Result<(u32, u32), RawError> {
    const GI_CALL: &str = "nvmlDeviceGetGpuInstanceId";
    const CI_CALL: &str = "nvmlDeviceGetComputeInstanceId";
    let gi_function = symbol(GI_CALL, &lib.nvmlDeviceGetGpuInstanceId)?;
    let ci_function = symbol(CI_CALL, &lib.nvmlDeviceGetComputeInstanceId)?;
    let (mut gi, mut ci): (c_uint, c_uint) = (0, 0);
    // SAFETY: valid out-pointers and a MIG device handle NVML gave us.
    check(GI_CALL, unsafe { gi_function(mig_device, &mut gi) })?;
    // SAFETY: as above.
    check(CI_CALL, unsafe { ci_function(mig_device, &mut ci) })?;
    Ok((gi, ci))
}
