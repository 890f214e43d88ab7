//! Why a prepare or unprepare failed, in two forms: the message the user reads (Events, the
//! kubelet's error) and a reason from a fixed list for the `reason` label of
//! `gpu_handler_claim_operations_total`. The reason names the failing step or the kind of error,
//! never the claim: a label must not grow with the number of claims.

use node_prepare::PrepareError;

use crate::resolve::ResolveError;

/// The bounded `reason` of a failed claim operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureReason {
    /// Reading the ResourceClaim from the API server failed.
    ClaimNotRead,
    /// The allocation does not match this node: replaced claim, not allocated, no device of ours,
    /// another node's pool.
    AllocationMismatch,
    /// An allocated device is not offered here (the card is gone, unhealthy or not ready).
    DeviceNotOffered,
    /// An opaque config is invalid or does not fit its device.
    InvalidConfig,
    /// Reading a Pod the claim is reserved for failed.
    PodNotRead,
    /// The vendor library (NVML) is not loaded yet.
    LibraryNotLoaded,
    /// The node lock was held by another prepare or unprepare for too long.
    NodeLockTimeout,
    /// A host file or directory could not be read or written.
    HostIo,
    /// The checkpoint cannot be trusted.
    CheckpointCorrupt,
    /// A driver or kernel file does not say what the pipeline needs.
    HostFile,
    /// The claim asks for something this node must not do.
    Refused,
    /// A vendor call for a device of the claim failed.
    VendorCall,
    /// A driver tool (`nvidia-smi`, the MPS control daemon) failed.
    DriverTool,
    /// Moving a card to or from vfio-pci failed.
    Vfio,
    /// A vendor call outside a claim (inspecting a card) failed.
    CardCall,
    /// The blocking task running the pipeline did not finish.
    TaskFailed,
    /// A MIG mode change stayed pending: another client holds the card.
    MigModePending,
    /// A test made a fault point fail (never in production).
    FaultInjected,
}

impl FailureReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClaimNotRead => "ClaimNotRead",
            Self::AllocationMismatch => "AllocationMismatch",
            Self::DeviceNotOffered => "DeviceNotOffered",
            Self::InvalidConfig => "InvalidConfig",
            Self::PodNotRead => "PodNotRead",
            Self::LibraryNotLoaded => "LibraryNotLoaded",
            Self::NodeLockTimeout => "NodeLockTimeout",
            Self::HostIo => "HostIo",
            Self::CheckpointCorrupt => "CheckpointCorrupt",
            Self::HostFile => "HostFile",
            Self::Refused => "Refused",
            Self::VendorCall => "VendorCall",
            Self::DriverTool => "DriverTool",
            Self::Vfio => "Vfio",
            Self::CardCall => "CardCall",
            Self::TaskFailed => "TaskFailed",
            Self::MigModePending => "MigModePending",
            Self::FaultInjected => "FaultInjected",
        }
    }
}

/// A failed claim operation: the user's message and the metric's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFailure {
    pub reason: FailureReason,
    pub message: String,
}

impl ClaimFailure {
    pub fn new(reason: FailureReason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

impl From<PrepareError> for ClaimFailure {
    fn from(error: PrepareError) -> Self {
        let reason = match &error {
            PrepareError::LockTimeout { .. } => FailureReason::NodeLockTimeout,
            PrepareError::Io { .. } => FailureReason::HostIo,
            PrepareError::CorruptCheckpoint { .. } => FailureReason::CheckpointCorrupt,
            PrepareError::HostFile { .. } => FailureReason::HostFile,
            PrepareError::Refused { .. } => FailureReason::Refused,
            PrepareError::Vendor { .. } => FailureReason::VendorCall,
            PrepareError::Tool { .. } => FailureReason::DriverTool,
            PrepareError::Vfio { .. } => FailureReason::Vfio,
            PrepareError::Card { .. } => FailureReason::CardCall,
            PrepareError::MigModePending { .. } => FailureReason::MigModePending,
            PrepareError::Injected { .. } => FailureReason::FaultInjected,
        };
        Self::new(reason, error.to_string())
    }
}

impl From<ResolveError> for ClaimFailure {
    fn from(error: ResolveError) -> Self {
        let reason = match &error {
            ResolveError::UnknownDevice { .. } => FailureReason::DeviceNotOffered,
            ResolveError::InvalidConfig { .. } | ResolveError::ConfigDoesNotFit { .. } => FailureReason::InvalidConfig,
            ResolveError::Replaced { .. }
            | ResolveError::NotAllocated { .. }
            | ResolveError::NoDeviceOfOurs { .. }
            | ResolveError::OtherPool { .. } => FailureReason::AllocationMismatch,
        };
        Self::new(reason, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;

    #[test]
    fn pipeline_errors_keep_their_message_and_get_their_kind() {
        let failure = ClaimFailure::from(PrepareError::LockTimeout {
            path: PathBuf::from("/plugins/gpu.deckhouse.io/node.lock"),
            waited: Duration::from_secs(30),
        });
        assert_eq!(failure.reason, FailureReason::NodeLockTimeout);
        assert!(failure.message.contains("node.lock"), "{}", failure.message);
        let refused = ClaimFailure::from(PrepareError::Refused {
            claim: "default/train".into(),
            reason: "device gpu0 is prepared for claim default/other".into(),
        });
        assert_eq!(
            (refused.reason.as_str(), refused.message.as_str()),
            (
                "Refused",
                "claim default/train: device gpu0 is prepared for claim default/other"
            )
        );
    }

    #[test]
    fn resolution_errors_say_whether_the_device_or_the_allocation_is_wrong() {
        let unknown = ClaimFailure::from(ResolveError::UnknownDevice {
            claim: "default/train".into(),
            device: "gpu3".into(),
            offered: "gpu0".into(),
        });
        assert_eq!(unknown.reason, FailureReason::DeviceNotOffered);
        let other_pool = ClaimFailure::from(ResolveError::OtherPool {
            claim: "default/train".into(),
            device: "gpu0".into(),
            pool: "gpus/w2".into(),
            ours: "gpus/w1".into(),
        });
        assert_eq!(other_pool.reason.as_str(), "AllocationMismatch");
        assert!(other_pool.message.contains("gpus/w2"), "{}", other_pool.message);
    }
}
