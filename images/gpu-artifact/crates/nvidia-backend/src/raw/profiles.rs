//! GPU instance profile info and placements.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{ARGUMENT_VERSION_MISMATCH, NOT_SUPPORTED, RawError, c_chars_to_string, check, struct_version, symbol};

/// One GPU instance profile as NVML reports it. `name` is `None` when it came
/// from the v1 call, which has no name field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawGpuInstanceProfile {
    pub id: u32,
    pub slice_count: u32,
    pub instance_count: u32,
    pub multiprocessors: u32,
    pub copy_engines: u32,
    pub decoders: u32,
    pub encoders: u32,
    pub jpeg: u32,
    pub ofa: u32,
    pub memory_mib: u64,
    pub name: Option<String>,
}

/// Profile info for the `NVML_GPU_INSTANCE_PROFILE_*` `index`: v3, else v2
/// (older drivers answer `ARGUMENT_VERSION_MISMATCH`), else v1 when the
/// versioned call refuses (it requires MIG to be enabled; v1 does not).
pub fn gpu_instance_profile(
    lib: &NvmlLib,
    device: nvmlDevice_t,
    index: u32,
) -> Result<RawGpuInstanceProfile, RawError> {
    let versioned = match profile_info_v3(lib, device, index) {
        Err(e) if e.code() == Some(ARGUMENT_VERSION_MISMATCH) => profile_info_v2(lib, device, index),
        other => other,
    };
    match versioned {
        Err(e) if e.code() == Some(NOT_SUPPORTED) || e.code().is_none() => profile_info_v1(lib, device, index),
        other => other,
    }
}

fn profile_info_v3(lib: &NvmlLib, device: nvmlDevice_t, index: u32) -> Result<RawGpuInstanceProfile, RawError> {
    const CALL: &str = "nvmlDeviceGetGpuInstanceProfileInfoV(v3)";
    let function = symbol(CALL, &lib.nvmlDeviceGetGpuInstanceProfileInfoV)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuInstanceProfileInfo_v3_t = unsafe { std::mem::zeroed() };
    info.version = struct_version::<nvmlGpuInstanceProfileInfo_v3_t>(3);
    // SAFETY: v3 has the same size as v2 (152 bytes); NVML reads `version`
    // to know which layout it was given.
    check(CALL, unsafe { function(device, index, (&raw mut info).cast()) })?;
    Ok(RawGpuInstanceProfile {
        id: info.id,
        slice_count: info.sliceCount,
        instance_count: info.instanceCount,
        multiprocessors: info.multiprocessorCount,
        copy_engines: info.copyEngineCount,
        decoders: info.decoderCount,
        encoders: info.encoderCount,
        jpeg: info.jpegCount,
        ofa: info.ofaCount,
        memory_mib: info.memorySizeMB,
        name: Some(c_chars_to_string(&info.name)),
    })
}

fn profile_info_v2(lib: &NvmlLib, device: nvmlDevice_t, index: u32) -> Result<RawGpuInstanceProfile, RawError> {
    const CALL: &str = "nvmlDeviceGetGpuInstanceProfileInfoV(v2)";
    let function = symbol(CALL, &lib.nvmlDeviceGetGpuInstanceProfileInfoV)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuInstanceProfileInfo_v2_t = unsafe { std::mem::zeroed() };
    info.version = struct_version::<nvmlGpuInstanceProfileInfo_v2_t>(2);
    // SAFETY: a valid, versioned out-struct.
    check(CALL, unsafe { function(device, index, &mut info) })?;
    Ok(RawGpuInstanceProfile {
        id: info.id,
        slice_count: info.sliceCount,
        instance_count: info.instanceCount,
        multiprocessors: info.multiprocessorCount,
        copy_engines: info.copyEngineCount,
        decoders: info.decoderCount,
        encoders: info.encoderCount,
        jpeg: info.jpegCount,
        ofa: info.ofaCount,
        memory_mib: info.memorySizeMB,
        name: Some(c_chars_to_string(&info.name)),
    })
}

fn profile_info_v1(lib: &NvmlLib, device: nvmlDevice_t, index: u32) -> Result<RawGpuInstanceProfile, RawError> {
    const CALL: &str = "nvmlDeviceGetGpuInstanceProfileInfo";
    let function = symbol(CALL, &lib.nvmlDeviceGetGpuInstanceProfileInfo)?;
    // SAFETY: all-zero is a valid value of this plain C struct.
    let mut info: nvmlGpuInstanceProfileInfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-struct.
    check(CALL, unsafe { function(device, index, &mut info) })?;
    Ok(RawGpuInstanceProfile {
        id: info.id,
        slice_count: info.sliceCount,
        instance_count: info.instanceCount,
        multiprocessors: info.multiprocessorCount,
        copy_engines: info.copyEngineCount,
        decoders: info.decoderCount,
        encoders: info.encoderCount,
        jpeg: info.jpegCount,
        ofa: info.ofaCount,
        memory_mib: info.memorySizeMB,
        name: None,
    })
}

/// Every placement of profile `profile_id`, as `(start, size)` in memory
/// slices (count query first, then the fill).
pub fn possible_placements(lib: &NvmlLib, device: nvmlDevice_t, profile_id: u32) -> Result<Vec<(u32, u32)>, RawError> {
    const CALL: &str = "nvmlDeviceGetGpuInstancePossiblePlacements_v2";
    let function = symbol(CALL, &lib.nvmlDeviceGetGpuInstancePossiblePlacements_v2)?;
    let mut count: c_uint = 0;
    // SAFETY: NULL placements asks only for the count.
    check(CALL, unsafe {
        function(device, profile_id, std::ptr::null_mut(), &mut count)
    })?;
    let mut placements = vec![nvmlGpuInstancePlacement_t { start: 0, size: 0 }; count as usize];
    if count > 0 {
        // SAFETY: `placements` holds `count` entries.
        check(CALL, unsafe {
            function(device, profile_id, placements.as_mut_ptr(), &mut count)
        })?;
        placements.truncate(count as usize);
    }
    Ok(placements.into_iter().map(|p| (p.start, p.size)).collect())
}
