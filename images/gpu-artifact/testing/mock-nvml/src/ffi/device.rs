//! Per-card queries: handles, identity, memory, compute capability, power.

use std::ffi::{CStr, c_char, c_int};
use std::os::raw::c_uint;

use nvml_wrapper_sys::bindings::*;

use super::lookup::{self, DeviceRef};
use super::{fill_chars, guard, input, out, write_str};
use crate::handles::{self, DeviceHandle};
use crate::pci::PciBusId;
use crate::{rc, session};

const MIB: u64 = 1024 * 1024;

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(index: c_uint, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        lookup::answering(&session, index as usize)?;
        *unsafe { out(device) }? = handles::device_to_raw(DeviceHandle::Physical { index: index as usize });
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByPciBusId_v2(
    pci_bus_id: *const c_char,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        let text = unsafe { CStr::from_ptr(input(pci_bus_id)?) };
        let wanted: PciBusId = text
            .to_str()
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or(rc::INVALID_ARGUMENT)?;
        let index = session.machine.card_index(&wanted).ok_or(rc::NOT_FOUND)?;
        lookup::answering(&session, index)?;
        *unsafe { out(device) }? = handles::device_to_raw(DeviceHandle::Physical { index });
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(uuid: *const c_char, device: *mut nvmlDevice_t) -> nvmlReturn_t {
    guard(|| {
        let session = session::current()?;
        let wanted = unsafe { CStr::from_ptr(input(uuid)?) }
            .to_str()
            .map_err(|_| rc::INVALID_ARGUMENT)?;
        let index = session
            .machine
            .cards
            .iter()
            .position(|c| c.uuid == wanted)
            .ok_or(rc::NOT_FOUND)?;
        lookup::answering(&session, index)?;
        *unsafe { out(device) }? = handles::device_to_raw(DeviceHandle::Physical { index });
        Ok(())
    })
}

/// The card's device minor (`/dev/nvidia<minor>`); a MIG device answers with its parent's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMinorNumber(device: nvmlDevice_t, minor: *mut c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        *unsafe { out(minor) }? = device.card().minor;
        Ok(())
    })
}

/// MIG device handles answer with `MIG <profile>` like nvidia-smi does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetName(device: nvmlDevice_t, name: *mut c_char, length: c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        let text = match &device.mig {
            None => device.card().model.name.clone(),
            Some((gi, _)) => {
                let mig = device.card().model.mig.as_ref().ok_or(rc::UNKNOWN)?;
                let profile = mig.profile_by_id(gi.profile_id).ok_or(rc::UNKNOWN)?;
                format!("{} MIG {}", device.card().model.name, profile.name)
            }
        };
        unsafe { write_str(name, length, &text) }
    })
}

/// The card UUID, or the `MIG-…` UUID for a MIG device handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetUUID(device: nvmlDevice_t, uuid: *mut c_char, length: c_uint) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        let text = match &device.mig {
            None => device.card().uuid.clone(),
            Some((_, ci)) => ci.uuid.clone(),
        };
        unsafe { write_str(uuid, length, &text) }
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(device: nvmlDevice_t, pci: *mut nvmlPciInfo_t) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::device(device)?;
        let card = device.card();
        let info = unsafe { out(pci) }?;
        fill_chars(&mut info.busIdLegacy, &card.pci_bus_id.nvml_legacy_bus_id());
        fill_chars(&mut info.busId, &card.pci_bus_id.nvml_bus_id());
        info.domain = card.pci_bus_id.domain;
        info.bus = card.pci_bus_id.bus;
        info.device = card.pci_bus_id.device;
        info.pciDeviceId = card.model.pci_device_id;
        info.pciSubSystemId = card.model.pci_sub_system_id;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetArchitecture(
    device: nvmlDevice_t,
    arch: *mut nvmlDeviceArchitecture_t,
) -> nvmlReturn_t {
    physical_query(device, |device| {
        *unsafe { out(arch) }? = device.card().model.architecture;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetBoardPartNumber(
    device: nvmlDevice_t,
    part_number: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    physical_query(device, |device| unsafe {
        write_str(part_number, length, &device.card().model.board_part_number)
    })
}

/// Total and reserved come from the model; used is what the fake processes
/// hold. Only the v2 struct version is accepted, as NVML checks it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(
    device: nvmlDevice_t,
    memory: *mut nvmlMemory_v2_t,
) -> nvmlReturn_t {
    physical_query(device, |device| {
        let info = unsafe { out(memory) }?;
        let expected_version = (std::mem::size_of::<nvmlMemory_v2_t>() as c_uint) | (2 << 24);
        if info.version != expected_version {
            return Err(rc::ARGUMENT_VERSION_MISMATCH);
        }
        let model = &device.card().model;
        let card = device.card().clone();
        let used: u64 = device
            .session
            .store
            .read(|state| state.gpu(&card).processes.iter().map(|p| p.used_gpu_memory_bytes).sum())
            .map_err(super::state_error)?;
        info.total = model.memory_total_mib * MIB;
        info.reserved = model.memory_reserved_mib * MIB;
        info.used = used;
        info.free = info.total.saturating_sub(info.reserved + used);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetCudaComputeCapability(
    device: nvmlDevice_t,
    major: *mut c_int,
    minor: *mut c_int,
) -> nvmlReturn_t {
    physical_query(device, |device| {
        let [cc_major, cc_minor] = device.card().model.compute_capability;
        *unsafe { out(major) }? = cc_major;
        *unsafe { out(minor) }? = cc_minor;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimitConstraints(
    device: nvmlDevice_t,
    min_limit: *mut c_uint,
    max_limit: *mut c_uint,
) -> nvmlReturn_t {
    physical_query(device, |device| {
        let power = &device.card().model.power;
        *unsafe { out(min_limit) }? = power.min_mw;
        *unsafe { out(max_limit) }? = power.max_mw;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetPowerManagementLimit(device: nvmlDevice_t, limit: *mut c_uint) -> nvmlReturn_t {
    physical_query(device, |device| {
        *unsafe { out(limit) }? = device.card().model.power.limit_mw;
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(device: nvmlDevice_t, limit: *mut c_uint) -> nvmlReturn_t {
    physical_query(device, |device| {
        *unsafe { out(limit) }? = device.card().model.power.enforced_mw;
        Ok(())
    })
}

/// A query that only whole cards answer (MIG handles share the parent's
/// values in real NVML, but the backend never asks them).
fn physical_query(device: nvmlDevice_t, body: impl FnOnce(&DeviceRef) -> Result<(), nvmlReturn_t>) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        body(&device)
    })
}
