//! Health events over an NVML event set: Xid errors (with their MIG attribution), uncorrectable
//! memory errors where the card reports them as events, and lost cards. The events are reported
//! raw; which Xids matter is the health model's policy, not the backend's.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use gpu_vendor::{HealthEvent, HealthEventKind, HealthMonitor, PciAddress, VendorError};
use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper_sys::bindings::{nvmlEventTypeDoubleBitEccError, nvmlEventTypeXidCriticalError};

use crate::errors::{from_nvml, from_raw};
use crate::raw::{self, events::RawEventSet};

const XID_EVENTS: u64 = nvmlEventTypeXidCriticalError as u64;
const DOUBLE_BIT_ECC_EVENTS: u64 = nvmlEventTypeDoubleBitEccError as u64;

/// Waits for events on a fixed set of cards. A lost card is reported once; afterwards the monitor
/// only times out (the handler rebuilds it when the set of answering cards changes).
pub struct NvidiaHealthMonitor {
    nvml: Arc<Nvml>,
    events: RawEventSet,
    /// Registered cards by raw device handle (as an address: handles are opaque values NVML hands
    /// back in event data).
    cards: Vec<(usize, PciAddress)>,
    queued: VecDeque<HealthEvent>,
    lost: bool,
}

impl NvidiaHealthMonitor {
    pub fn start(nvml: Arc<Nvml>, pci_addresses: &[PciAddress]) -> Result<Self, VendorError> {
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
            // Double-bit ECC events only where the card delivers them (masked, as NVIDIA's device
            // plugin does: asking for an unsupported type registers nothing at all).
            let wanted = supported & (XID_EVENTS | DOUBLE_BIT_ECC_EVENTS);
            events
                .register(handle, wanted)
                .map_err(|e| from_raw(pci_address, "register health events", e))?;
            cards.push((handle as usize, *pci_address));
        }
        Ok(NvidiaHealthMonitor {
            nvml,
            events,
            cards,
            queued: VecDeque::new(),
            lost: false,
        })
    }

    /// NVML's wait says only that some card is lost; the cards that answer "lost" to a handle
    /// lookup are the ones. When none does (the loss was transient), every watched card is
    /// reported, as NVIDIA's plugins do, and the next reading tells the truth.
    fn lost_cards(&self) -> Vec<PciAddress> {
        let lost: Vec<PciAddress> = self
            .cards
            .iter()
            .map(|(_, pci)| *pci)
            .filter(|pci| {
                matches!(
                    self.nvml.device_by_pci_bus_id(pci.to_string()).and_then(|d| d.uuid()),
                    Err(NvmlError::GpuLost)
                )
            })
            .collect();
        if lost.is_empty() {
            self.cards.iter().map(|(_, pci)| *pci).collect()
        } else {
            lost
        }
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
                self.lost = true;
                let lost = self.lost_cards();
                self.queued.extend(lost.into_iter().map(|pci_address| HealthEvent {
                    pci_address,
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
        let Some(event) = event else {
            return Ok(None);
        };
        let Some((_, pci_address)) = self.cards.iter().find(|(handle, _)| *handle == event.device as usize) else {
            tracing::warn!(
                event_type = event.event_type,
                data = event.data,
                "health event for a device that is not watched"
            );
            return Ok(None);
        };
        let kind = if event.event_type & XID_EVENTS != 0 {
            HealthEventKind::Xid {
                xid: event.data,
                gpu_instance_id: event.gpu_instance_id,
                compute_instance_id: event.compute_instance_id,
            }
        } else if event.event_type & DOUBLE_BIT_ECC_EVENTS != 0 {
            HealthEventKind::UncorrectableMemoryError
        } else {
            return Ok(None);
        };
        Ok(Some(HealthEvent {
            pci_address: *pci_address,
            kind,
        }))
    }
}
