//! The causes that make a card unhealthy (critical) or worth a note (informational), each with
//! the words an administrator reads, the condition reason, and the device taint it puts on the
//! card's published devices.

use gpu_vendor::RecoveryAction;
use serde::{Deserialize, Serialize};

use crate::xid_names::xid_label;

/// The domain of our taint keys.
pub const TAINT_DOMAIN: &str = "gpu.deckhouse.io";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Severity {
    /// The card must not take new work (taint NoSchedule, or NoExecute where the ModuleConfig asks
    /// for it); HardwareHealthy False; Pods using it see Unhealthy.
    Critical,
    /// Worth knowing, the card stays usable (taint effect None where the server knows it).
    Informational,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Cause {
    /// NVML reports the card lost (fallen off the bus).
    GpuLost,
    /// Row remapping failed: no spare row is left, the memory can no longer be repaired.
    RowRemapFailure,
    /// Uncorrectable memory errors since the driver loaded or the card was last reset.
    UncorrectableMemory { errors: u64 },
    /// A critical Xid, kept until the card recovers.
    Xid(u64),
    /// The driver asks for an action (a reset, a reboot, draining P2P traffic).
    RecoveryAction(RecoveryAction),
    /// Rows were remapped and take effect at the next reset; the card keeps working.
    RowRemapPending,
}

impl Cause {
    pub fn severity(&self) -> Severity {
        match self {
            Cause::RowRemapPending => Severity::Informational,
            _ => Severity::Critical,
        }
    }

    /// The `HardwareHealthy` reason and the `cause` label of the metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Cause::GpuLost => "GPULost",
            Cause::RowRemapFailure => "RowRemapFailure",
            Cause::UncorrectableMemory { .. } => "UncorrectableMemoryErrors",
            Cause::Xid(_) => "XidCritical",
            Cause::RecoveryAction(_) => "RecoveryActionRequired",
            Cause::RowRemapPending => "RowRemapPending",
        }
    }

    /// What the metrics put in their `detail` label: the Xid, the action; empty otherwise.
    pub fn detail(&self) -> String {
        match self {
            Cause::Xid(xid) => xid.to_string(),
            Cause::RecoveryAction(action) => action_value(*action),
            Cause::UncorrectableMemory { .. } => "uncorrectable".to_owned(),
            _ => String::new(),
        }
    }

    /// A key that stays the same while the cause lasts (the Xid number, not the error count), so
    /// the time it was first seen can be kept.
    pub fn key(&self) -> String {
        match self {
            Cause::Xid(xid) => format!("xid-{xid}"),
            Cause::UncorrectableMemory { .. } => "uncorrectable-memory".to_owned(),
            Cause::RecoveryAction(action) => format!("recovery-action-{}", action_value(*action)),
            Cause::GpuLost => "gpu-lost".to_owned(),
            Cause::RowRemapFailure => "row-remap-failed".to_owned(),
            Cause::RowRemapPending => "row-remap-pending".to_owned(),
        }
    }

    /// The taint the card's devices carry while the cause lasts. One key per kind of fault, so a
    /// device never needs more than the API's 4 taints.
    pub fn taint(&self) -> TaintSpec {
        let (key, value) = match self {
            Cause::GpuLost => ("gpu-lost", "true".to_owned()),
            Cause::RowRemapFailure => ("row-remap", "failed".to_owned()),
            Cause::RowRemapPending => ("row-remap", "pending".to_owned()),
            Cause::UncorrectableMemory { .. } => ("memory", "uncorrectable-errors".to_owned()),
            Cause::Xid(xid) => ("xid", xid.to_string()),
            Cause::RecoveryAction(action) => ("recovery-action", action_value(*action)),
        };
        TaintSpec {
            key: format!("{TAINT_DOMAIN}/{key}"),
            value,
        }
    }

    /// The fault in words.
    pub fn describe(&self) -> String {
        match self {
            Cause::GpuLost => "the GPU has fallen off the bus (NVML reports it lost)".to_owned(),
            Cause::RowRemapFailure => {
                "row remapping failed: no spare memory row is left, so its memory can no longer be repaired".to_owned()
            }
            Cause::UncorrectableMemory { errors } => {
                format!("{errors} uncorrectable memory error(s) since the driver loaded or the GPU was last reset")
            }
            Cause::Xid(xid) => format!("critical {}", xid_label(*xid)),
            Cause::RecoveryAction(action) => format!("the NVIDIA driver asks for {}", action.describe()),
            Cause::RowRemapPending => "memory rows were remapped and take effect at the next GPU reset".to_owned(),
        }
    }
}

/// A taint's key and value (the effect follows from the severity and the ModuleConfig).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaintSpec {
    pub key: String,
    pub value: String,
}

/// A recovery action as a label value: `gpu-reset`, `node-reboot`, ...
fn action_value(action: RecoveryAction) -> String {
    match action {
        RecoveryAction::None => "none".to_owned(),
        RecoveryAction::GpuReset => "gpu-reset".to_owned(),
        RecoveryAction::NodeReboot => "node-reboot".to_owned(),
        RecoveryAction::DrainP2p => "drain-p2p".to_owned(),
        RecoveryAction::DrainAndReset => "drain-and-reset".to_owned(),
        RecoveryAction::Other(value) => format!("action-{value}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taints_are_ours_and_valid_label_values() {
        let causes = [
            Cause::GpuLost,
            Cause::RowRemapFailure,
            Cause::RowRemapPending,
            Cause::UncorrectableMemory { errors: 2 },
            Cause::Xid(79),
            Cause::RecoveryAction(RecoveryAction::NodeReboot),
        ];
        for cause in causes {
            let taint = cause.taint();
            assert!(taint.key.starts_with("gpu.deckhouse.io/"), "{taint:?}");
            assert!(
                taint.value.len() <= 63 && taint.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
                "{taint:?}"
            );
        }
        assert_eq!(Cause::Xid(79).taint().value, "79");
        assert_eq!(Cause::RowRemapPending.severity(), Severity::Informational);
        assert_eq!(Cause::Xid(48).describe(), "critical Xid 48 (double-bit ECC error)");
    }

    #[test]
    fn keys_survive_a_changing_error_count() {
        assert_eq!(
            Cause::UncorrectableMemory { errors: 1 }.key(),
            Cause::UncorrectableMemory { errors: 5 }.key()
        );
        assert_eq!(Cause::RowRemapPending.key(), "row-remap-pending");
        assert_ne!(Cause::Xid(48).key(), Cause::Xid(79).key());
    }
}
