//! Step 10: record `PrepareCompleted` with the CDI ids and MIG devices, and
//! end the pipeline with the devices for the kubelet.

use super::{PrepareRun, PrepareStep};
use crate::checkpoint::ClaimState;
use crate::error::PrepareError;

pub(crate) struct RecordPrepareCompleted;

impl PrepareStep for RecordPrepareCompleted {
    fn name(&self) -> &'static str {
        "record PrepareCompleted"
    }

    fn id(&self) -> &'static str {
        "record-prepare-completed"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        let label = run.claim_label();
        let claim = run
            .checkpoint
            .claims
            .get_mut(&run.request.claim.uid)
            .ok_or_else(|| PrepareError::refused(&label, "the claim is not recorded as PrepareStarted"))?;
        for (index, device) in claim.devices.iter_mut().enumerate() {
            device.cdi_device_ids = run.cdi_device_ids.get(index).cloned().unwrap_or_default();
            device.mig_instance = run
                .created
                .iter()
                .find(|(i, ..)| *i == index)
                .map(|(_, _, record)| record.clone());
        }
        claim.state = ClaimState::PrepareCompleted;
        let devices = claim.prepared_devices();
        run.store.save(&run.checkpoint)?;
        tracing::info!(claim = %label, devices = devices.len(), "prepared");
        run.outcome = Some(devices);
        Ok(())
    }

    /// Nothing after the last step fails in production, but an undo must leave a record the next
    /// start rolls back, never a `PrepareCompleted` claim whose devices the undo removes.
    fn undo(&self, run: &mut PrepareRun<'_>) {
        let uid = run.request.claim.uid.clone();
        if let Some(claim) = run.checkpoint.claims.get_mut(&uid) {
            claim.state = ClaimState::PrepareStarted;
            if let Err(error) = run.store.save(&run.checkpoint) {
                tracing::warn!(claim = %run.claim_label(), %error, "cannot record the claim as PrepareStarted again; reconciliation will see it as prepared");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::MigInstanceRecord;
    use crate::steps::LoadCheckpoint;
    use crate::steps::RecordPrepareStarted;
    use crate::test_node::{Node, mig_request};

    #[test]
    fn records_ids_and_instances_and_returns_the_devices() {
        let node = Node::a30();
        let request = mig_request("uid-a", &[0]);
        let mut run = node.run(&request);
        LoadCheckpoint.run(&mut run).unwrap();
        RecordPrepareStarted.run(&mut run).unwrap();
        let record = MigInstanceRecord {
            gpu_instance_id: 1,
            compute_instance_id: 0,
            uuid: "MIG-1".into(),
        };
        run.created.push((0, node.card(), record.clone()));
        run.cdi_device_ids = vec![vec!["gpu.deckhouse.io/claim=uid-a-gpu0-mig-2g12gb-0".into()]];
        RecordPrepareCompleted.run(&mut run).unwrap();

        let devices = run.outcome.expect("the pipeline ends here");
        assert_eq!(devices[0].request_names, ["mig"]);
        assert_eq!(devices[0].pool_name, "gpus/w1");
        let stored = node.store().load().unwrap().data;
        let claim = &stored.claims["uid-a"];
        assert_eq!(claim.state, ClaimState::PrepareCompleted);
        assert_eq!(claim.devices[0].mig_instance, Some(record));
        assert_eq!(claim.devices[0].cdi_device_ids, devices[0].cdi_device_ids);
    }
}
