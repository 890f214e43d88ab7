//! Health events: what makes a card `HardwareHealthy=False`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::VendorError;
use crate::pci_address::PciAddress;

/// One health observation about one card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthEvent {
    pub pci_address: PciAddress,
    pub kind: HealthEventKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum HealthEventKind {
    /// An NVIDIA Xid error. `critical` is false for Xids the backend's policy
    /// treats as application errors (the card stays healthy); such events are
    /// still reported so they can be logged or shown as warnings.
    Xid {
        xid: u64,
        critical: bool,
        gpu_instance_id: Option<u32>,
        compute_instance_id: Option<u32>,
    },
    /// The card stopped answering (fell off the bus); always critical.
    DeviceLost,
}

impl HealthEvent {
    /// Whether this event makes the card unhealthy.
    pub fn is_critical(&self) -> bool {
        match self.kind {
            HealthEventKind::Xid { critical, .. } => critical,
            HealthEventKind::DeviceLost => true,
        }
    }
}

/// A blocking source of health events for a fixed set of cards. Run it on a
/// dedicated thread (or `spawn_blocking`): `next` waits.
pub trait HealthMonitor: Send {
    /// Waits up to `timeout` for the next event; `Ok(None)` on timeout.
    fn next_event(&mut self, timeout: Duration) -> Result<Option<HealthEvent>, VendorError>;
}
