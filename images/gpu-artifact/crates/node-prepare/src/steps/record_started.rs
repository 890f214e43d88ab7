//! Step 4: record `PrepareStarted` durably before the first side effect, so
//! a crash from here on is found and rolled back at the next start.

use super::{PrepareRun, PrepareStep};
use crate::checkpoint::{CheckpointClaim, CheckpointDevice, ClaimState};
use crate::error::PrepareError;

pub(crate) struct RecordPrepareStarted;

impl PrepareStep for RecordPrepareStarted {
    fn name(&self) -> &'static str {
        "record PrepareStarted"
    }

    fn id(&self) -> &'static str {
        "record-prepare-started"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        let devices = run
            .request
            .devices
            .iter()
            .enumerate()
            .map(|(index, device)| CheckpointDevice {
                request: device.request.clone(),
                pool: device.pool.clone(),
                device: device.device.clone(),
                share_id: device.share_id.clone(),
                target: device.target.clone(),
                cdi_device_ids: Vec::new(),
                mig_instance: None,
                mig_create_attempted: false,
                sharing: run.plan(index).sharing,
                vfio: None,
                admin_access: device.admin_access,
            })
            .collect();
        let claim = &run.request.claim;
        run.checkpoint.claims.insert(
            claim.uid.clone(),
            CheckpointClaim {
                namespace: claim.namespace.clone(),
                name: claim.name.clone(),
                state: ClaimState::PrepareStarted,
                devices,
            },
        );
        run.store.save(&run.checkpoint)?;
        Ok(())
    }

    /// Removes the record, unless a MIG create was given up on: the record then says where its
    /// instance may still appear, and the claim's rollback (its retry, the node's upkeep, the next
    /// start) takes it away once the call has returned.
    fn undo(&self, run: &mut PrepareRun<'_>) {
        if !run.mig_creates_abandoned.is_empty() {
            tracing::warn!(claim = %run.claim_label(), cards = ?run.mig_creates_abandoned, "a MIG create did not return in time; the claim stays PrepareStarted until its rollback finds what the call made");
            return;
        }
        run.checkpoint.claims.remove(&run.request.claim.uid);
        if let Err(error) = run.store.save(&run.checkpoint) {
            tracing::warn!(claim = %run.claim_label(), %error, "cannot remove the PrepareStarted record; reconciliation will");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::LoadCheckpoint;
    use crate::test_node::{Node, mig_request};

    #[test]
    fn records_the_claim_as_started_and_removes_it_on_undo() {
        let node = Node::a30();
        let request = mig_request("uid-a", &[2]);
        let mut run = node.run(&request);
        LoadCheckpoint.run(&mut run).unwrap();
        RecordPrepareStarted.run(&mut run).unwrap();
        let stored = node.store().load().unwrap().data;
        let claim = &stored.claims["uid-a"];
        assert_eq!(claim.state, ClaimState::PrepareStarted);
        assert_eq!(claim.devices[0].device, "gpu0-mig-2g12gb-2");
        assert_eq!(claim.devices[0].target, request.devices[0].target);
        RecordPrepareStarted.undo(&mut run);
        assert!(node.store().load().unwrap().data.claims.is_empty());
    }
}
