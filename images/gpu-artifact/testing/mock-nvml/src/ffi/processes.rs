//! Running compute processes: the fake processes tests put in the state.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{guard, lookup, write_array};

/// Not attributed to a MIG instance (NVML's `0xFFFFFFFF`).
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;

/// On a card handle: every process on the card (we are privileged). On a MIG
/// device handle: the processes of that GPU/compute instance only.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut nvmlProcessInfo_t,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        let card = device.card().clone();
        let processes = device
            .session
            .store
            .read(|state| state.gpu(&card).processes)
            .map_err(super::state_error)?;
        let listed: Vec<nvmlProcessInfo_t> = processes
            .iter()
            .filter(|p| match &device.mig {
                None => true,
                Some((gi, ci)) => p.gpu_instance_id == Some(gi.id) && p.compute_instance_id == Some(ci.id),
            })
            .map(|p| nvmlProcessInfo_t {
                pid: p.pid,
                usedGpuMemory: p.used_gpu_memory_bytes,
                gpuInstanceId: p.gpu_instance_id.unwrap_or(NO_INSTANCE),
                computeInstanceId: p.compute_instance_id.unwrap_or(NO_INSTANCE),
            })
            .collect();
        unsafe { write_array(infos, info_count, &listed) }
    })
}
