//! Taking a claim's side effects away again, for unprepare and for a claim a crash left
//! `PrepareStarted` (rolled back by the next prepare of it or by reconciliation): a fixed list of
//! parts, each safe to repeat, then the checkpoint entry. A failure stops the teardown and keeps
//! the entry, so the next attempt (the kubelet's retry, the next start) finds what is left.
//!
//! Like the prepare steps, every part is followed by a fault point, `<context>/after/<id>`, with
//! the context `unprepare` or `rollback`.

mod parts;

use gpu_vendor::VendorBackend;

use crate::checkpoint::{CheckpointClaim, CheckpointData, CheckpointStore};
use crate::config::NodePrepareConfig;
use crate::error::PrepareError;
use crate::fault_point::fault_point;

pub(crate) use parts::TEARDOWN_PARTS;

/// The fault-point context of a kubelet's unprepare.
pub(crate) const UNPREPARE: &str = "unprepare";
/// The fault-point context of a rollback of a `PrepareStarted` claim.
pub(crate) const ROLLBACK: &str = "rollback";

/// One part of a teardown.
pub(crate) trait TeardownPart: Sync {
    /// A stable kebab-case id, for the fault point after the part.
    fn id(&self) -> &'static str;
    fn run(&self, teardown: &mut Teardown<'_>) -> Result<(), PrepareError>;
}

/// What a teardown works on.
pub(crate) struct Teardown<'a> {
    pub config: &'a NodePrepareConfig,
    pub backend: &'a dyn VendorBackend,
    pub store: &'a CheckpointStore,
    pub checkpoint: &'a mut CheckpointData,
    pub uid: &'a str,
    pub claim: CheckpointClaim,
}

/// Removes what the claim with `uid` made on the host, then its checkpoint entry (saved). A claim
/// the checkpoint does not hold has nothing to remove.
pub(crate) fn tear_down_claim(
    config: &NodePrepareConfig,
    backend: &dyn VendorBackend,
    store: &CheckpointStore,
    checkpoint: &mut CheckpointData,
    uid: &str,
    context: &str,
) -> Result<(), PrepareError> {
    let Some(claim) = checkpoint.claims.get(uid).cloned() else {
        return Ok(());
    };
    let label = claim.label();
    let mut teardown = Teardown {
        config,
        backend,
        store,
        checkpoint,
        uid,
        claim,
    };
    for part in TEARDOWN_PARTS {
        part.run(&mut teardown)?;
        fault_point(&format!("{context}/after/{}", part.id()))?;
    }
    teardown.checkpoint.claims.remove(uid);
    store.save(teardown.checkpoint)?;
    tracing::info!(claim = %label, context, "removed the claim's devices and its checkpoint entry");
    fault_point(&format!("{context}/after/remove-checkpoint-entry"))
}
