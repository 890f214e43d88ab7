//! Why a prepare, unprepare or reconcile failed, naming the object (claim,
//! device, file) and the reason a human needs.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use gpu_vendor::VendorError;

#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Another prepare or unprepare held the node lock for too long.
    #[error("node lock {}: still held by another prepare or unprepare after {waited:?}", path.display())]
    LockTimeout { path: PathBuf, waited: Duration },
    /// A file or directory of the host could not be read or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The checkpoint cannot be trusted. Never answered by starting empty:
    /// the devices it records would be lost.
    #[error("checkpoint {}: {reason}", path.display())]
    CorruptCheckpoint { path: PathBuf, reason: String },
    /// A driver or kernel file does not say what the pipeline needs.
    #[error("{}: {reason}", path.display())]
    HostFile { path: PathBuf, reason: String },
    /// The claim asks for something this node must not do; nothing was changed.
    #[error("claim {claim}: {reason}")]
    Refused { claim: String, reason: String },
    /// A vendor call failed while realising a device of the claim.
    #[error("claim {claim}: device {device}: {source}")]
    Vendor {
        claim: String,
        device: String,
        source: VendorError,
    },
    /// A driver tool (`nvidia-smi`, `nvidia-cuda-mps-control`) could not do what it was asked.
    #[error("{command}: {reason}")]
    Tool { command: String, reason: String },
    /// A PCI function could not be moved between drivers, or its IOMMU group is not usable.
    #[error("claim {claim}: card {card}: {source}")]
    Vfio {
        claim: String,
        card: String,
        source: Box<host_inventory::vfio::VfioError>,
    },
    /// A MIG mode change stayed pending: another client holds the card. The change was taken back;
    /// the kubelet retries, and the handler pauses its own DCGM on the node meanwhile.
    #[error(
        "claim {claim}: device {device}: card {card}: turning MIG mode {} stayed pending because the card is \
         held: {holders}; the change was taken back and is retried with the kubelet's next attempt (the module's \
         DCGM on this node is paused meanwhile)",
        on_off(.enable)
    )]
    MigModePending {
        claim: String,
        device: String,
        card: String,
        enable: bool,
        holders: String,
    },
    /// A test asked a fault point to fail (`GPU_HANDLER_FAULT_POINT=<point>=fail`); never in production.
    #[error("fault point {point} failed on purpose (test)")]
    Injected { point: String },
    /// A vendor call failed outside a claim (reconciliation, card inspection).
    #[error("GPU {card}: {source}")]
    Card { card: String, source: VendorError },
}

fn on_off(enable: &bool) -> &'static str {
    if *enable { "on" } else { "off" }
}

impl PrepareError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> PrepareError {
        let path = path.into();
        move |source| PrepareError::Io { action, path, source }
    }

    pub(crate) fn refused(claim: &str, reason: impl Into<String>) -> PrepareError {
        PrepareError::Refused {
            claim: claim.to_owned(),
            reason: reason.into(),
        }
    }
}
