//! Direct calls into NVML for what nvml-wrapper 0.13 does not cover or gets
//! wrong: profile info v2/v3 (with the profile name), possible placements
//! (the wrapper's version always returns an empty list), GPU and compute
//! instance lifecycle, and event waits that keep the GPU/compute instance
//! ids. Every call goes through the library the wrapper already loaded
//! (`Nvml::lib()`), so there is no second `dlopen`.
//!
//! This is the only module with `unsafe` code; each function checks the
//! symbol, passes correctly sized structs with their `version` set, and
//! returns plain Rust values.

// NVML's C API is reached only here.
#![allow(unsafe_code)]

pub mod events;
pub mod instances;
pub mod profiles;
pub mod remapped_rows;

use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlReturn_enum_NVML_SUCCESS, nvmlReturn_t};

pub use nvml_wrapper_sys::bindings::{
    nvmlReturn_enum_NVML_ERROR_ARGUMENT_VERSION_MISMATCH as ARGUMENT_VERSION_MISMATCH,
    nvmlReturn_enum_NVML_ERROR_GPU_IS_LOST as GPU_IS_LOST, nvmlReturn_enum_NVML_ERROR_IN_USE as IN_USE,
    nvmlReturn_enum_NVML_ERROR_INSUFFICIENT_RESOURCES as INSUFFICIENT_RESOURCES,
    nvmlReturn_enum_NVML_ERROR_INVALID_ARGUMENT as INVALID_ARGUMENT, nvmlReturn_enum_NVML_ERROR_NOT_FOUND as NOT_FOUND,
    nvmlReturn_enum_NVML_ERROR_NOT_SUPPORTED as NOT_SUPPORTED,
    nvmlReturn_enum_NVML_ERROR_RESET_REQUIRED as RESET_REQUIRED, nvmlReturn_enum_NVML_ERROR_TIMEOUT as TIMEOUT,
    nvmlReturn_enum_NVML_SUCCESS as SUCCESS,
};

/// A failed raw call: either the symbol is missing from the loaded library
/// or NVML returned an error code (kept raw: nvml-wrapper does not know
/// codes such as `NVML_ERROR_INSUFFICIENT_RESOURCES`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RawError {
    MissingSymbol { call: &'static str, reason: String },
    Code { call: &'static str, code: nvmlReturn_t },
}

impl RawError {
    pub fn code(&self) -> Option<nvmlReturn_t> {
        match self {
            RawError::Code { code, .. } => Some(*code),
            RawError::MissingSymbol { .. } => None,
        }
    }

    pub fn call(&self) -> &'static str {
        match self {
            RawError::Code { call, .. } | RawError::MissingSymbol { call, .. } => call,
        }
    }
}

fn check(call: &'static str, code: nvmlReturn_t) -> Result<(), RawError> {
    if code == nvmlReturn_enum_NVML_SUCCESS {
        Ok(())
    } else {
        Err(RawError::Code { call, code })
    }
}

fn symbol<'a, T>(call: &'static str, loaded: &'a Result<T, libloading::Error>) -> Result<&'a T, RawError> {
    loaded.as_ref().map_err(|e| RawError::MissingSymbol {
        call,
        reason: e.to_string(),
    })
}

/// The raw handle of a wrapper device.
pub fn device_handle(device: &Device<'_>) -> nvmlDevice_t {
    // SAFETY: the handle is only passed back to NVML while `device` (and so
    // the library) is alive.
    unsafe { device.handle() }
}

/// `NVML_STRUCT_VERSION(name, ver)`: the struct size with the version in
/// the top byte.
const fn struct_version<T>(version: u32) -> u32 {
    (std::mem::size_of::<T>() as u32) | (version << 24)
}

/// A NUL-terminated `char[N]` field as a Rust string.
fn c_chars_to_string(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
