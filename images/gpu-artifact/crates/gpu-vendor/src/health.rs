//! Health facts of a card: events as they happen (Xid errors, a lost card) and a reading taken on
//! demand (memory errors, row remapping, the recovery action the driver asks for). The port only
//! reports; judging what makes a card unhealthy is the health model's job (crate `gpu-health`).

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
    /// An NVIDIA Xid error, with the MIG instance it was attributed to when the driver could tell.
    Xid {
        xid: u64,
        gpu_instance_id: Option<u32>,
        compute_instance_id: Option<u32>,
    },
    /// The driver reported an uncorrectable (double-bit) memory error; the counters in the next
    /// [`HealthReading`] say how many.
    UncorrectableMemoryError,
    /// The card stopped answering (fell off the bus).
    DeviceLost,
}

/// A blocking source of health events for a fixed set of cards. Run it on a dedicated thread (or
/// `spawn_blocking`): `next` waits.
pub trait HealthMonitor: Send {
    /// Waits up to `timeout` for the next event; `Ok(None)` on timeout.
    fn next_event(&mut self, timeout: Duration) -> Result<Option<HealthEvent>, VendorError>;
}

/// What the card says about its health right now. `None` fields are queries the card or driver
/// does not answer (older drivers, cards without ECC): the model then cannot use them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthReading {
    /// The card answers with "lost" (fallen off the bus): nothing else could be read.
    pub lost: bool,
    /// Uncorrectable memory errors since the driver loaded or the card was last reset.
    pub uncorrectable_memory_errors: Option<u64>,
    pub remapped_rows: Option<RemappedRows>,
    /// What the driver says must happen before the card can be trusted again.
    pub recovery_action: Option<RecoveryAction>,
}

impl HealthReading {
    /// The reading of a card that answers "lost" to every query.
    pub fn lost() -> Self {
        Self {
            lost: true,
            ..Self::default()
        }
    }
}

/// Row remapping (Ampere and newer): faulty memory rows are replaced by spare ones at the next reset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemappedRows {
    /// Rows remapped for correctable errors.
    pub correctable: u32,
    /// Rows remapped for uncorrectable errors.
    pub uncorrectable: u32,
    /// A remapping waits for a reset of the card to take effect.
    pub pending: bool,
    /// A remapping failed (no spare row left): the memory can no longer be repaired.
    pub failure: bool,
}

/// The recovery action the driver asks for (NVML field `NVML_FI_DEV_GET_GPU_RECOVERY_ACTION`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum RecoveryAction {
    None,
    GpuReset,
    NodeReboot,
    /// Peer-to-peer traffic must stop before anything else can be decided.
    DrainP2p,
    /// The card runs at reduced capacity until it is drained and reset.
    DrainAndReset,
    /// A value this module does not know (a newer driver); treated as needing a reset.
    Other(u32),
}

impl RecoveryAction {
    /// NVML's `nvmlDeviceGpuRecoveryAction_t` value.
    pub fn from_nvml(value: u32) -> Self {
        match value {
            0 => RecoveryAction::None,
            1 => RecoveryAction::GpuReset,
            2 => RecoveryAction::NodeReboot,
            3 => RecoveryAction::DrainP2p,
            4 => RecoveryAction::DrainAndReset,
            other => RecoveryAction::Other(other),
        }
    }

    /// How an administrator reads it.
    pub fn describe(self) -> String {
        match self {
            RecoveryAction::None => "no action".to_owned(),
            RecoveryAction::GpuReset => "a GPU reset".to_owned(),
            RecoveryAction::NodeReboot => "a node reboot".to_owned(),
            RecoveryAction::DrainP2p => "stopping peer-to-peer (NVLink) traffic".to_owned(),
            RecoveryAction::DrainAndReset => "draining the GPU and resetting it".to_owned(),
            RecoveryAction::Other(value) => format!("recovery action {value}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_recovery_actions_are_named() {
        assert_eq!(RecoveryAction::from_nvml(0), RecoveryAction::None);
        assert_eq!(RecoveryAction::from_nvml(1), RecoveryAction::GpuReset);
        assert_eq!(RecoveryAction::from_nvml(2), RecoveryAction::NodeReboot);
        assert_eq!(RecoveryAction::from_nvml(4), RecoveryAction::DrainAndReset);
        assert_eq!(RecoveryAction::from_nvml(9), RecoveryAction::Other(9));
        assert_eq!(RecoveryAction::from_nvml(2).describe(), "a node reboot");
    }
}
