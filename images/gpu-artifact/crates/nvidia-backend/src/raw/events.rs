//! Event sets, waited on raw so the GPU/compute instance ids survive
//! (nvml-wrapper's `EventData` drops them).

use std::os::raw::c_ulonglong;
use std::sync::Arc;

use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::*;

use super::{RawError, check, symbol};

/// NVML's "not attributable to an instance" id.
const NO_INSTANCE: u32 = 0xFFFF_FFFF;

/// An owned NVML event set. NVML event sets may be waited on from any
/// thread; the set is freed on drop.
pub struct RawEventSet {
    nvml: Arc<Nvml>,
    handle: nvmlEventSet_t,
}

// SAFETY: an nvmlEventSet_t is an opaque handle NVML lets any thread use;
// we only move it between threads, never share it unsynchronised.
unsafe impl Send for RawEventSet {}

/// One delivered event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent {
    pub device: nvmlDevice_t,
    pub event_type: u64,
    pub data: u64,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
}

impl RawEventSet {
    pub fn create(nvml: Arc<Nvml>) -> Result<Self, RawError> {
        const CALL: &str = "nvmlEventSetCreate";
        let function = symbol(CALL, &nvml.lib().nvmlEventSetCreate)?;
        let mut handle: nvmlEventSet_t = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        check(CALL, unsafe { function(&mut handle) })?;
        Ok(RawEventSet { nvml, handle })
    }

    pub fn supported_types(&self, device: nvmlDevice_t) -> Result<u64, RawError> {
        const CALL: &str = "nvmlDeviceGetSupportedEventTypes";
        let function = symbol(CALL, &self.nvml.lib().nvmlDeviceGetSupportedEventTypes)?;
        let mut types: c_ulonglong = 0;
        // SAFETY: a valid out-pointer.
        check(CALL, unsafe { function(device, &mut types) })?;
        Ok(types)
    }

    pub fn register(&self, device: nvmlDevice_t, types: u64) -> Result<(), RawError> {
        const CALL: &str = "nvmlDeviceRegisterEvents";
        let function = symbol(CALL, &self.nvml.lib().nvmlDeviceRegisterEvents)?;
        // SAFETY: our live set and a device handle NVML gave us.
        check(CALL, unsafe { function(device, types, self.handle) })
    }

    /// Waits up to `timeout_ms`; `Ok(None)` on `NVML_ERROR_TIMEOUT`.
    pub fn wait(&self, timeout_ms: u32) -> Result<Option<RawEvent>, RawError> {
        const CALL: &str = "nvmlEventSetWait_v2";
        let function = symbol(CALL, &self.nvml.lib().nvmlEventSetWait_v2)?;
        // SAFETY: all-zero is a valid value of this plain C struct.
        let mut data: nvmlEventData_t = unsafe { std::mem::zeroed() };
        // SAFETY: our live set and a valid out-struct.
        match check(CALL, unsafe { function(self.handle, &mut data, timeout_ms) }) {
            Err(e) if e.code() == Some(super::TIMEOUT) => return Ok(None),
            other => other?,
        }
        let instance = |id: u32| (id != NO_INSTANCE).then_some(id);
        Ok(Some(RawEvent {
            device: data.device,
            event_type: data.eventType,
            data: data.eventData,
            gpu_instance_id: instance(data.gpuInstanceId),
            compute_instance_id: instance(data.computeInstanceId),
        }))
    }
}

impl Drop for RawEventSet {
    fn drop(&mut self) {
        if let Ok(function) = self.nvml.lib().nvmlEventSetFree.as_ref() {
            // SAFETY: our set, freed once.
            unsafe { function(self.handle) };
        }
    }
}
