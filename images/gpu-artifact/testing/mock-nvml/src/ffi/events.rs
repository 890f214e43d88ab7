//! Event sets delivering Xid events.
//!
//! Xids come from two places: the description's `xidEvents` (each event set
//! sees them once, right after the card is registered) and the state file's
//! `xidEvents`, where tests append them while a process waits. As in NVML,
//! a set sees only state-file events that happened after registration.

use std::collections::{BTreeMap, VecDeque};
use std::os::raw::{c_uint, c_ulonglong};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nvml_wrapper_sys::bindings::*;

use super::{guard, lookup, out};
use crate::handles::{self, DeviceHandle};
use crate::rc;
use crate::session;
use crate::state::XidEvent;

const XID_EVENT: c_ulonglong = nvmlEventTypeXidCriticalError as c_ulonglong;
const NO_INSTANCE: c_uint = 0xFFFF_FFFF;
/// How often a waiting call looks at the state file again.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

#[derive(Default)]
struct EventSet {
    /// Card index -> last state-file event sequence already seen.
    seen_up_to: BTreeMap<usize, u64>,
    /// Description events not yet delivered.
    queued: VecDeque<(usize, XidEvent)>,
}

struct Registry {
    next_id: u64,
    sets: BTreeMap<u64, EventSet>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    next_id: 1,
    sets: BTreeMap::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        session::current()?;
        let handle = unsafe { out(set) }?;
        let mut registry = registry();
        let id = registry.next_id;
        registry.next_id += 1;
        registry.sets.insert(id, EventSet::default());
        *handle = handles::event_set_to_raw(id);
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceGetSupportedEventTypes(
    device: nvmlDevice_t,
    event_types: *mut c_ulonglong,
) -> nvmlReturn_t {
    guard(|| {
        lookup::physical_device(device)?;
        *unsafe { out(event_types) }? = XID_EVENT;
        Ok(())
    })
}

/// Only Xid events are modelled: asking for other types is
/// `NVML_ERROR_NOT_SUPPORTED`, which leaves the set usable (NVML contract).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    device: nvmlDevice_t,
    event_types: c_ulonglong,
    set: nvmlEventSet_t,
) -> nvmlReturn_t {
    guard(|| {
        let device = lookup::physical_device(device)?;
        let id = handles::event_set_from_raw(set).ok_or(rc::INVALID_ARGUMENT)?;
        if event_types & !XID_EVENT != 0 {
            return Err(rc::NOT_SUPPORTED);
        }
        let last_seq = device
            .session
            .store
            .read(|state| state.next_event_seq.max(1) - 1)
            .map_err(super::state_error)?;
        let card = device.card();
        let mut registry = registry();
        let event_set = registry.sets.get_mut(&id).ok_or(rc::INVALID_ARGUMENT)?;
        if event_set.seen_up_to.insert(device.index, last_seq).is_none() {
            for spec in device
                .session
                .machine
                .xid_events
                .iter()
                .filter(|e| e.pci_bus_id == card.pci_bus_id)
            {
                let event = XidEvent {
                    seq: 0,
                    pci_bus_id: spec.pci_bus_id,
                    xid: spec.xid,
                    gpu_instance_id: spec.gpu_instance_id,
                    compute_instance_id: spec.compute_instance_id,
                };
                event_set.queued.push_back((device.index, event));
            }
        }
        Ok(())
    })
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: nvmlEventSet_t,
    data: *mut nvmlEventData_t,
    timeoutms: c_uint,
) -> nvmlReturn_t {
    guard(|| {
        let id = handles::event_set_from_raw(set).ok_or(rc::INVALID_ARGUMENT)?;
        let data = unsafe { out(data) }?;
        let deadline = Instant::now() + Duration::from_millis(u64::from(timeoutms));
        loop {
            if let Some((index, event)) = next_event(id)? {
                *data = nvmlEventData_t {
                    device: handles::device_to_raw(DeviceHandle::Physical { index }),
                    eventType: XID_EVENT,
                    eventData: event.xid,
                    gpuInstanceId: event.gpu_instance_id.unwrap_or(NO_INSTANCE),
                    computeInstanceId: event.compute_instance_id.unwrap_or(NO_INSTANCE),
                };
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(rc::TIMEOUT);
            }
            std::thread::sleep(POLL_INTERVAL.min(deadline - now));
        }
    })
}

/// The next undelivered event of a set, or `NVML_ERROR_GPU_IS_LOST` when a
/// registered card fell off the bus.
fn next_event(id: u64) -> Result<Option<(usize, XidEvent)>, nvmlReturn_t> {
    let session = session::current()?;
    let mut registry = registry();
    let event_set = registry.sets.get_mut(&id).ok_or(rc::INVALID_ARGUMENT)?;
    if let Some(queued) = event_set.queued.pop_front() {
        return Ok(Some(queued));
    }
    let (lost, pending) = session
        .store
        .read(|state| {
            let lost = event_set.seen_up_to.keys().any(|&index| {
                let card = &session.machine.cards[index];
                state.gpus.get(&card.pci_bus_id).is_some_and(|gpu| gpu.lost)
            });
            let pending = state
                .xid_events
                .iter()
                .filter_map(|event| {
                    let index = session.machine.card_index(&event.pci_bus_id)?;
                    let seen = event_set.seen_up_to.get(&index)?;
                    (event.seq > *seen).then(|| (index, event.clone()))
                })
                .min_by_key(|(_, event)| event.seq);
            (lost, pending)
        })
        .map_err(super::state_error)?;
    if lost {
        return Err(rc::GPU_IS_LOST);
    }
    if let Some((index, event)) = &pending {
        event_set.seen_up_to.insert(*index, event.seq);
    }
    Ok(pending)
}

#[unsafe(no_mangle)]
pub extern "C" fn nvmlEventSetFree(set: nvmlEventSet_t) -> nvmlReturn_t {
    guard(|| {
        let id = handles::event_set_from_raw(set).ok_or(rc::INVALID_ARGUMENT)?;
        registry().sets.remove(&id).map(|_| ()).ok_or(rc::INVALID_ARGUMENT)
    })
}
