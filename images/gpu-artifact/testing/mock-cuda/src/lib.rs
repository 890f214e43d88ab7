//! A mock `libcuda.so.1`: the CUDA driver API's first three calls, answered from the device nodes the
//! process can open, as the real library does (`/dev/nvidiactl` for the driver, `/dev/nvidia<N>` per
//! card). It exists so the real node's driver root holds the driver library CUDA programs link to, a
//! real ELF object the dynamic linker and `ldconfig` handle like the original. Test-only.

// C exports write through caller pointers.
#![allow(unsafe_code)]

use std::ffi::c_int;

/// `CUresult` values of `cuda.h`.
const CUDA_SUCCESS: c_int = 0;
const CUDA_ERROR_INVALID_VALUE: c_int = 1;
const CUDA_ERROR_NO_DEVICE: c_int = 100;

/// The CUDA version the mock driver supports (major * 1000 + minor * 10).
const DRIVER_VERSION: c_int = 13000;

fn cards() -> c_int {
    let Ok(entries) = std::fs::read_dir("/dev") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.strip_prefix("nvidia")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .count() as c_int
}

#[unsafe(no_mangle)]
pub extern "C" fn cuInit(_flags: u32) -> c_int {
    if std::path::Path::new("/dev/nvidiactl").exists() && cards() > 0 {
        CUDA_SUCCESS
    } else {
        CUDA_ERROR_NO_DEVICE
    }
}

/// # Safety
/// `version` must be null or point to writable memory for one `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> c_int {
    if version.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsafe { *version = DRIVER_VERSION };
    CUDA_SUCCESS
}

/// # Safety
/// `count` must be null or point to writable memory for one `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> c_int {
    if count.is_null() {
        return CUDA_ERROR_INVALID_VALUE;
    }
    unsafe { *count = cards() };
    CUDA_SUCCESS
}
