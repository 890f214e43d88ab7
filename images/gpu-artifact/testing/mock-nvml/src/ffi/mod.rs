//! The C ABI: every NVML function the NVIDIA backend calls, with NVML's
//! signatures (types from the nvml-wrapper-sys bindings) and return codes.
//!
//! Each export converts raw pointers at the boundary and hands plain values
//! to the state and rule modules; no unsafe code lives outside `ffi` except
//! the `dladdr` call that locates the library.

// The safety contract of each export is NVML's C API contract.
#![allow(clippy::missing_safety_doc)]

mod compute_instance;
mod device;
mod events;
mod gpu_instance;
mod gpu_instance_profile;
mod health;
mod lookup;
mod mig_mode;
mod nvlink;
mod processes;
mod system;

use std::ffi::c_char;
use std::os::raw::c_uint;
use std::panic::{AssertUnwindSafe, catch_unwind};

use nvml_wrapper_sys::bindings::nvmlReturn_t;

use crate::rc;

/// Runs an export body; a panic becomes `NVML_ERROR_UNKNOWN` instead of
/// unwinding into C.
fn guard(body: impl FnOnce() -> Result<(), nvmlReturn_t>) -> nvmlReturn_t {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => rc::SUCCESS,
        Ok(Err(code)) => code,
        Err(_) => rc::UNKNOWN,
    }
}

/// An output parameter; NULL is `NVML_ERROR_INVALID_ARGUMENT`.
unsafe fn out<'a, T>(ptr: *mut T) -> Result<&'a mut T, nvmlReturn_t> {
    // SAFETY: the caller passes NULL or a pointer to a writable T (NVML contract).
    unsafe { ptr.as_mut() }.ok_or(rc::INVALID_ARGUMENT)
}

/// An input parameter; NULL is `NVML_ERROR_INVALID_ARGUMENT`.
unsafe fn input<'a, T>(ptr: *const T) -> Result<&'a T, nvmlReturn_t> {
    // SAFETY: the caller passes NULL or a pointer to a readable T (NVML contract).
    unsafe { ptr.as_ref() }.ok_or(rc::INVALID_ARGUMENT)
}

/// Copies `value` NUL-terminated into a caller buffer of `length` bytes;
/// a short buffer is `NVML_ERROR_INSUFFICIENT_SIZE`, as in NVML.
unsafe fn write_str(buffer: *mut c_char, length: c_uint, value: &str) -> Result<(), nvmlReturn_t> {
    if buffer.is_null() {
        return Err(rc::INVALID_ARGUMENT);
    }
    let bytes = value.as_bytes();
    if bytes.len() + 1 > length as usize {
        return Err(rc::INSUFFICIENT_SIZE);
    }
    // SAFETY: `buffer` holds `length` bytes and we write `bytes.len() + 1 <= length`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buffer, bytes.len());
        *buffer.add(bytes.len()) = 0;
    }
    Ok(())
}

/// Fills a fixed `char[N]` field of an NVML struct (truncating, NUL-terminated).
fn fill_chars<const N: usize>(field: &mut [c_char; N], value: &str) {
    field.fill(0);
    for (slot, byte) in field.iter_mut().zip(value.bytes().take(N - 1)) {
        *slot = byte as c_char;
    }
}

/// Copies `items` into a caller array that holds `*count` entries, NVML's
/// count protocol: NULL array or a short one reports the needed count with
/// `NVML_ERROR_INSUFFICIENT_SIZE` (NULL with nothing to report succeeds).
unsafe fn write_array<T: Copy>(array: *mut T, count: *mut c_uint, items: &[T]) -> Result<(), nvmlReturn_t> {
    // SAFETY: NVML contract for count parameters.
    let count = unsafe { out(count) }?;
    let capacity = *count as usize;
    *count = items.len() as c_uint;
    if items.is_empty() {
        return Ok(());
    }
    if array.is_null() || capacity < items.len() {
        return Err(rc::INSUFFICIENT_SIZE);
    }
    // SAFETY: `array` holds `capacity >= items.len()` entries.
    unsafe { std::ptr::copy_nonoverlapping(items.as_ptr(), array, items.len()) };
    Ok(())
}

/// A state-file failure is the mock's own problem: say so and report UNKNOWN.
fn state_error(error: std::io::Error) -> nvmlReturn_t {
    eprintln!("mock libnvidia-ml: state file: {error}");
    rc::UNKNOWN
}
