//! `nvmlDeviceGetRemappedRows`, which nvml-wrapper 0.13 does not wrap.

use std::os::raw::c_uint;

use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::nvmlDevice_t;

use super::{RawError, check, symbol};

/// The card's row remapping counters (Ampere and newer).
pub fn remapped_rows(nvml: &Nvml, device: nvmlDevice_t) -> Result<gpu_vendor::RemappedRows, RawError> {
    const CALL: &str = "nvmlDeviceGetRemappedRows";
    let function = symbol(CALL, &nvml.lib().nvmlDeviceGetRemappedRows)?;
    let (mut correctable, mut uncorrectable, mut pending, mut failure): (c_uint, c_uint, c_uint, c_uint) = (0, 0, 0, 0);
    // SAFETY: a device handle NVML gave us and four valid out-pointers.
    check(CALL, unsafe {
        function(device, &mut correctable, &mut uncorrectable, &mut pending, &mut failure)
    })?;
    Ok(gpu_vendor::RemappedRows {
        correctable,
        uncorrectable,
        pending: pending != 0,
        failure: failure != 0,
    })
}
