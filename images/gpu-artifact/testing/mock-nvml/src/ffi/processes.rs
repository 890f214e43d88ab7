//! Running compute processes: the fake processes tests put in the state.

use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::{guard, lookup, write_array, write_str};
use crate::{rc, session};

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

/// The name of a process the state knows on any card (a compute process with a name, or a client);
/// `NVML_ERROR_NOT_FOUND` for any other pid, as NVML answers for a pid that is gone.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlSystemGetProcessName(
    pid: c_uint,
    name: *mut std::ffi::c_char,
    length: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        let found = session
            .store
            .read(|state| {
                state.gpus.values().find_map(|gpu| {
                    let process = gpu.processes.iter().find(|p| p.pid == pid).and_then(|p| p.name.clone());
                    process.or_else(|| gpu.clients.iter().find(|c| c.pid == pid).map(|c| c.name.clone()))
                })
            })
            .map_err(super::state_error)?;
        let found = found.ok_or(rc::NOT_FOUND)?;
        unsafe { write_str(name, length, &found) }
    })
}
