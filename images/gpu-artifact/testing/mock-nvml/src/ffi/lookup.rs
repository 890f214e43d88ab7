//! Resolving handles against the session and the state.

use std::sync::Arc;

use nvml_wrapper_sys::bindings::{nvmlDevice_t, nvmlReturn_t};

use crate::handles::{self, DeviceHandle};
use crate::machine::Card;
use crate::rc;
use crate::session::{self, Session};
use crate::state::{ComputeInstanceState, GpuInstanceState, MockState};

/// A device handle resolved to its card (and MIG device, for MIG handles).
pub struct DeviceRef {
    pub session: Arc<Session>,
    pub index: usize,
    pub mig: Option<(GpuInstanceState, ComputeInstanceState)>,
}

impl DeviceRef {
    pub fn card(&self) -> &Card {
        &self.session.machine.cards[self.index]
    }
}

/// Any device handle, whole card or MIG device; stale MIG handles are
/// `NVML_ERROR_INVALID_ARGUMENT`, every handle of a lost card `NVML_ERROR_GPU_IS_LOST`.
pub fn device(raw: nvmlDevice_t) -> Result<DeviceRef, nvmlReturn_t> {
    let device = any_device(raw)?;
    answering(&device.session, device.index)?;
    Ok(device)
}

/// `NVML_ERROR_GPU_IS_LOST` when card `index` fell off the bus: NVML then answers no query about
/// it (the header lists that code for every device call).
pub fn answering(session: &Session, index: usize) -> Result<(), nvmlReturn_t> {
    let card = session.card(index)?;
    let lost = session
        .store
        .read(|state| state.gpus.get(&card.pci_bus_id).is_some_and(|gpu| gpu.lost))
        .map_err(super::state_error)?;
    if lost { Err(rc::GPU_IS_LOST) } else { Ok(()) }
}

fn any_device(raw: nvmlDevice_t) -> Result<DeviceRef, nvmlReturn_t> {
    let session = session::current()?;
    match handles::device_from_raw(raw).ok_or(rc::INVALID_ARGUMENT)? {
        DeviceHandle::Physical { index } => {
            session.card(index)?;
            Ok(DeviceRef {
                session,
                index,
                mig: None,
            })
        }
        DeviceHandle::Mig {
            compute_instance_serial,
        } => {
            let found = session
                .store
                .read(|state| find_compute_instance(&session, state, compute_instance_serial))
                .map_err(super::state_error)?;
            let (index, gi, ci) = found.ok_or(rc::INVALID_ARGUMENT)?;
            Ok(DeviceRef {
                session,
                index,
                mig: Some((gi, ci)),
            })
        }
    }
}

/// A whole-card handle; MIG device handles are refused where NVML wants the
/// parent.
pub fn physical_device(raw: nvmlDevice_t) -> Result<DeviceRef, nvmlReturn_t> {
    let device = device(raw)?;
    if device.mig.is_some() {
        return Err(rc::INVALID_ARGUMENT);
    }
    Ok(device)
}

pub fn find_gpu_instance(session: &Session, state: &MockState, serial: u64) -> Option<(usize, GpuInstanceState)> {
    session.machine.cards.iter().enumerate().find_map(|(index, card)| {
        let gpu = state.gpus.get(&card.pci_bus_id)?;
        let gi = gpu.gpu_instances.iter().find(|gi| gi.serial == serial)?;
        Some((index, gi.clone()))
    })
}

pub fn find_compute_instance(
    session: &Session,
    state: &MockState,
    serial: u64,
) -> Option<(usize, GpuInstanceState, ComputeInstanceState)> {
    session.machine.cards.iter().enumerate().find_map(|(index, card)| {
        let gpu = state.gpus.get(&card.pci_bus_id)?;
        gpu.gpu_instances.iter().find_map(|gi| {
            let ci = gi.compute_instances.iter().find(|ci| ci.serial == serial)?;
            Some((index, gi.clone(), ci.clone()))
        })
    })
}
