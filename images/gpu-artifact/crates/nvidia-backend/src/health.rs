//! Xid health monitoring over an NVML event set.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use gpu_vendor::{HealthEvent, HealthEventKind, HealthMonitor, PciAddress, VendorError};
use nvml_wrapper::Nvml;
use nvml_wrapper_sys::bindings::nvmlEventTypeXidCriticalError;

use crate::errors::{from_nvml, from_raw};
use crate::raw::{self, events::RawEventSet};
use crate::xid_policy::XidPolicy;

const XID_EVENTS: u64 = nvmlEventTypeXidCriticalError as u64;

/// Waits for Xid events on a fixed set of cards and classifies them with an
/// [`XidPolicy`]. A lost card is reported once per card; afterwards the
/// monitor only times out (the handler must rebuild it once the card is back).
pub struct NvidiaHealthMonitor {
    events: RawEventSet,
    /// Registered cards by raw device handle (as an address: handles are
    /// opaque values NVML hands back in event data).
    cards: Vec<(usize, PciAddress)>,
    policy: XidPolicy,
    queued: VecDeque<HealthEvent>,
    lost: bool,
}

impl NvidiaHealthMonitor {
    pub fn start(nvml: Arc<Nvml>, pci_addresses: &[PciAddress], policy: XidPolicy) -> Result<Self, VendorError> {
        let events = RawEventSet::create(Arc::clone(&nvml)).map_err(|e| VendorError::Failed {
            call: "nvmlEventSetCreate".to_owned(),
            reason: format!("{e:?}"),
        })?;
        let mut cards = Vec::with_capacity(pci_addresses.len());
        for pci_address in pci_addresses {
            let device = nvml
                .device_by_pci_bus_id(pci_address.to_string())
                .map_err(|e| from_nvml(pci_address, "nvmlDeviceGetHandleByPciBusId_v2", e))?;
            let handle = raw::device_handle(&device);
            let supported = events
                .supported_types(handle)
                .map_err(|e| from_raw(pci_address, "supported event types", e))?;
            if supported & XID_EVENTS == 0 {
                return Err(VendorError::NotSupported {
                    pci_address: *pci_address,
                    what: "Xid events".to_owned(),
                });
            }
            events
                .register(handle, XID_EVENTS)
                .map_err(|e| from_raw(pci_address, "register Xid events", e))?;
            cards.push((handle as usize, *pci_address));
        }
        Ok(NvidiaHealthMonitor {
            events,
            cards,
            policy,
            queued: VecDeque::new(),
            lost: false,
        })
    }
}

impl HealthMonitor for NvidiaHealthMonitor {
    fn next_event(&mut self, timeout: Duration) -> Result<Option<HealthEvent>, VendorError> {
        if let Some(event) = self.queued.pop_front() {
            return Ok(Some(event));
        }
        if self.lost {
            std::thread::sleep(timeout);
            return Ok(None);
        }
        let timeout_ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let event = match self.events.wait(timeout_ms) {
            Ok(event) => event,
            Err(e) if e.code() == Some(raw::GPU_IS_LOST) => {
                // NVML does not say which card; every watched card is suspect.
                self.lost = true;
                self.queued
                    .extend(self.cards.iter().map(|(_, pci_address)| HealthEvent {
                        pci_address: *pci_address,
                        kind: HealthEventKind::DeviceLost,
                    }));
                return Ok(self.queued.pop_front());
            }
            Err(e) => {
                return Err(VendorError::Failed {
                    call: e.call().to_owned(),
                    reason: format!("{e:?}"),
                });
            }
        };
        let Some(event) = event.filter(|e| e.event_type & XID_EVENTS != 0) else {
            return Ok(None);
        };
        let Some((_, pci_address)) = self.cards.iter().find(|(handle, _)| *handle == event.device as usize) else {
            tracing::warn!(xid = event.data, "Xid event for a device that is not watched");
            return Ok(None);
        };
        Ok(Some(HealthEvent {
            pci_address: *pci_address,
            kind: HealthEventKind::Xid {
                xid: event.data,
                critical: self.policy.is_critical(event.data),
                gpu_instance_id: event.gpu_instance_id,
                compute_instance_id: event.compute_instance_id,
            },
        }))
    }
}
