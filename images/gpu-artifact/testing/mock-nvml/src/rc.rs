//! NVML return codes under short names (values: mig-profiles.md section 2.1,
//! taken from the nvml-wrapper-sys bindings so they cannot drift).

use nvml_wrapper_sys::bindings::*;

pub const SUCCESS: nvmlReturn_t = nvmlReturn_enum_NVML_SUCCESS;
pub const UNINITIALIZED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNINITIALIZED;
pub const INVALID_ARGUMENT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT;
pub const NOT_SUPPORTED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED;
pub const NOT_FOUND: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_NOT_FOUND;
pub const INSUFFICIENT_SIZE: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_SIZE;
pub const DRIVER_NOT_LOADED: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_DRIVER_NOT_LOADED;
pub const TIMEOUT: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_TIMEOUT;
pub const GPU_IS_LOST: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST;
pub const IN_USE: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_IN_USE;
pub const INSUFFICIENT_RESOURCES: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES;
pub const ARGUMENT_VERSION_MISMATCH: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
pub const UNKNOWN: nvmlReturn_t = nvmlReturn_enum_NVML_ERROR_UNKNOWN;

/// `nvmlErrorString` text for the codes the mock returns.
pub fn describe(code: nvmlReturn_t) -> &'static std::ffi::CStr {
    match code {
        SUCCESS => c"Success",
        UNINITIALIZED => c"Uninitialized",
        INVALID_ARGUMENT => c"Invalid Argument",
        NOT_SUPPORTED => c"Not Supported",
        NOT_FOUND => c"Not Found",
        INSUFFICIENT_SIZE => c"Insufficient Size",
        DRIVER_NOT_LOADED => c"Driver Not Loaded",
        TIMEOUT => c"Timeout",
        GPU_IS_LOST => c"GPU is lost",
        IN_USE => c"In use by another client",
        INSUFFICIENT_RESOURCES => c"Insufficient Resources",
        ARGUMENT_VERSION_MISMATCH => c"Argument version mismatch",
        _ => c"Unknown Error",
    }
}
