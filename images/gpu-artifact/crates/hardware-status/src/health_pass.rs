//! The health half of a pass: hands the monitor's events and the cards' readings to the health
//! model, keeps the last description of every card (a card that fell off the bus can no longer be
//! read, but its offers must stay published, tainted), and tells people what changed (Events on the
//! PhysicalGPU).

use std::collections::BTreeMap;
use std::sync::Arc;

use controller_plumbing::EventPublisher;
use gpu_api::PhysicalGPU;
use gpu_health::{CLEAR_ANNOTATION, CardHealth};
use gpu_vendor::{GpuInventory, HealthEvent, PciAddress, VendorError};
use kube::{Resource, ResourceExt};

use crate::desired::{card_address, on_nvidia_driver};
use crate::health_tracker::{CardInput, HealthChange, HealthTracker};
use crate::vendor_link::LinkReading;

/// Event reasons on the PhysicalGPU.
pub const UNHEALTHY_EVENT: &str = "HardwareUnhealthy";
pub const RECOVERED_EVENT: &str = "HardwareRecovered";

pub struct HealthPass {
    pub tracker: HealthTracker,
    /// The last inventory each card answered with.
    known: BTreeMap<PciAddress, GpuInventory>,
    events: EventPublisher,
}

/// What the pass judged.
pub struct Judged {
    pub health: BTreeMap<PciAddress, CardHealth>,
    /// The inventory to offer each card with (the last one of a lost card).
    pub inventories: BTreeMap<PciAddress, GpuInventory>,
}

impl HealthPass {
    pub fn new(tracker: HealthTracker, events: EventPublisher) -> Self {
        Self {
            tracker,
            known: BTreeMap::new(),
            events,
        }
    }

    /// Records a monitor event against the card's current clear annotation.
    pub fn note(&mut self, stored: &[Arc<PhysicalGPU>], event: &HealthEvent) {
        let token = stored
            .iter()
            .find(|gpu| card_address(gpu) == Some(event.pci_address))
            .and_then(|gpu| clear_token(gpu));
        self.tracker.record(event, token.as_deref(), now());
    }

    pub async fn judge(&mut self, stored: &[Arc<PhysicalGPU>], reading: &LinkReading) -> Judged {
        let LinkReading::Available { readings, health, .. } = reading else {
            return Judged {
                health: BTreeMap::new(),
                inventories: BTreeMap::new(),
            };
        };
        for (address, answer) in readings {
            match answer {
                Ok(inventory) => {
                    self.known.insert(*address, inventory.clone());
                }
                Err(VendorError::DeviceLost(_)) => {}
                Err(_) => {
                    self.known.remove(address);
                }
            }
        }
        self.known.retain(|address, _| readings.contains_key(address));
        let on_driver: Vec<(&PhysicalGPU, PciAddress)> = stored
            .iter()
            .filter(|gpu| on_nvidia_driver(gpu))
            .filter_map(|gpu| Some((gpu.as_ref(), card_address(gpu)?)))
            .collect();
        let names: Vec<String> = on_driver.iter().map(|(gpu, _)| gpu.name_any()).collect();
        let tokens: Vec<Option<String>> = on_driver.iter().map(|(gpu, _)| clear_token(gpu)).collect();
        let cards: Vec<CardInput<'_>> = on_driver
            .iter()
            .zip(&names)
            .zip(&tokens)
            .map(|(((_, address), name), token)| CardInput {
                address: *address,
                physical_gpu: name,
                uuid: self.known.get(address).map(|i| i.uuid.as_str()),
                reading: health.get(address).and_then(|r| r.as_ref().ok()),
                clear_token: token.as_deref(),
            })
            .collect();
        let (judged, changes) = self.tracker.pass(&cards, now());
        for change in changes {
            self.announce(stored, change).await;
        }
        Judged {
            health: judged,
            inventories: self.known.clone(),
        }
    }

    /// Unix seconds when the next kept Xid clears by its quiet period.
    pub fn next_recovery_at(&self) -> Option<i64> {
        self.tracker.next_recovery_at()
    }

    async fn announce(&self, stored: &[Arc<PhysicalGPU>], change: HealthChange) {
        let address = match &change {
            HealthChange::Unhealthy { address, .. }
            | HealthChange::Recovered { address, .. }
            | HealthChange::Healthy { address } => *address,
        };
        let Some(gpu) = stored.iter().find(|gpu| card_address(gpu) == Some(address)) else {
            return;
        };
        let object = gpu.object_ref(&());
        match change {
            HealthChange::Unhealthy { message, .. } => {
                let note = format!("GPU {address} is unhealthy: {message}");
                self.events.warning(&object, UNHEALTHY_EVENT, "CheckHealth", note).await;
            }
            HealthChange::Recovered { recovery, .. } => {
                let xids: Vec<String> = recovery.xids.iter().map(u64::to_string).collect();
                let note = format!("GPU {address}: Xid {} cleared: {}", xids.join(", "), recovery.why);
                self.events.normal(&object, RECOVERED_EVENT, "CheckHealth", note).await;
            }
            HealthChange::Healthy { .. } => {
                let note = format!("GPU {address} has no critical fault any more");
                self.events.normal(&object, RECOVERED_EVENT, "CheckHealth", note).await;
            }
        }
    }
}

fn clear_token(gpu: &PhysicalGPU) -> Option<String> {
    gpu.annotations().get(CLEAR_ANNOTATION).cloned()
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
