//! Library lifetime and system-wide queries.

use std::ffi::{c_char, c_int};
use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::nvmlReturn_t;

use super::{guard, out, write_str};
use crate::{rc, session};

#[unsafe(no_mangle)]
pub extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    guard(|| match session::init() {
        rc::SUCCESS => Ok(()),
        code => Err(code),
    })
}

/// Flags (`NVML_INIT_FLAG_NO_GPUS`, `NO_ATTACH`) change nothing for a mock.
#[unsafe(no_mangle)]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    nvmlInit_v2()
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    guard(|| match session::shutdown() {
        rc::SUCCESS => Ok(()),
        code => Err(code),
    })
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    rc::describe(result).as_ptr()
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        unsafe { write_str(version, length, &session.machine.driver_version) }
    })
}

/// NVML's own version is the driver version with the CUDA major in front
/// (`13.580.76.05`), as real libraries report it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(version: *mut c_char, length: c_uint) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        let machine = &session.machine;
        let text = format!("{}.{}", machine.cuda_driver_version / 1000, machine.driver_version);
        unsafe { write_str(version, length, &text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        *unsafe { out(version) }? = session.machine.cuda_driver_version;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    unsafe { nvmlSystemGetCudaDriverVersion_v2(version) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        *unsafe { out(count) }? = session.machine.cards.len() as c_uint;
        Ok(())
    })
}
