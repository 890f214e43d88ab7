//! Step 2: read the checkpoint. A claim already `PrepareCompleted` for the devices it is allocated
//! now ends the pipeline with its recorded devices (the kubelet repeats calls); one recorded with
//! other devices (deallocated and allocated again while the node kept its first devices, its
//! unprepare lost) is refused, its devices kept for what may still run on them. One left
//! `PrepareStarted` by a crash or a failed undo is rolled back first, so the claim starts from a
//! clean card.

use super::{PrepareRun, PrepareStep};
use crate::checkpoint::ClaimState;
use crate::error::PrepareError;
use crate::rebooted::forget_rebooted_claims;
use crate::teardown::{ROLLBACK, tear_down_claim};

pub(crate) struct LoadCheckpoint;

impl PrepareStep for LoadCheckpoint {
    fn name(&self) -> &'static str {
        "load the checkpoint"
    }

    fn id(&self) -> &'static str {
        "load-checkpoint"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        let loaded = run.store.load()?;
        run.checkpoint = loaded.data;
        if !loaded.dropped_after_reboot.is_empty() {
            forget_rebooted_claims(run.config, &loaded.dropped_after_reboot);
            run.store.save(&run.checkpoint)?;
        }
        let uid = run.request.claim.uid.clone();
        let Some(claim) = run.checkpoint.claims.get(&uid).cloned() else {
            return Ok(());
        };
        match claim.state {
            ClaimState::PrepareCompleted => {
                let recorded = describe(
                    claim
                        .devices
                        .iter()
                        .map(|d| (&d.request, &d.pool, &d.device, &d.share_id)),
                );
                let asked = describe(
                    run.request
                        .devices
                        .iter()
                        .map(|d| (&d.request, &d.pool, &d.device, &d.share_id)),
                );
                if recorded != asked {
                    return Err(PrepareError::refused(
                        &claim.label(),
                        format!(
                            "it is prepared on this node for {recorded} but now allocated {asked}; the node keeps \
                             the devices it prepared until the kubelet unprepares the claim (delete the Pods that \
                             use it), then prepares the new allocation"
                        ),
                    ));
                }
                run.outcome = Some(claim.prepared_devices());
            }
            ClaimState::PrepareStarted => {
                tracing::info!(claim = %claim.label(), "rolling back an earlier prepare that did not complete");
                tear_down_claim(run.config, run.backend, run.store, &mut run.checkpoint, &uid, ROLLBACK)?;
            }
        }
        Ok(())
    }

    /// Reading changed nothing; a rollback of an earlier attempt is not
    /// something to restore.
    fn undo(&self, _run: &mut PrepareRun<'_>) {}
}

/// `device gpu0 (request gpu, share 1a2b), device gpu1 (request gpu)`, in allocation order: what
/// a claim holds, compared and shown whole.
fn describe<'a>(devices: impl Iterator<Item = (&'a String, &'a String, &'a String, &'a Option<String>)>) -> String {
    let described: Vec<String> = devices
        .map(|(request, pool, device, share)| {
            let share = share.as_ref().map(|id| format!(", share {id}")).unwrap_or_default();
            format!("device {device} of pool {pool} (request {request}{share})")
        })
        .collect();
    described.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{CheckpointClaim, CheckpointDevice};
    use crate::test_node::{Node, physical_request};

    fn record(node: &Node, uid: &str, state: ClaimState) {
        let request = physical_request(uid);
        let mut data = node.store().load().unwrap().data;
        let devices = request
            .devices
            .iter()
            .map(|d| CheckpointDevice {
                request: d.request.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
                share_id: None,
                target: d.target.clone(),
                cdi_device_ids: vec![format!("gpu.deckhouse.io/claim={uid}-gpu0")],
                mig_instance: None,
                mig_create_attempted: false,
                sharing: None,
                vfio: None,
                admin_access: false,
            })
            .collect();
        let claim = CheckpointClaim {
            namespace: "default".into(),
            name: uid.into(),
            state,
            devices,
        };
        data.claims.insert(uid.into(), claim);
        node.store().save(&data).unwrap();
    }

    #[test]
    fn a_completed_claim_ends_the_pipeline_with_its_recorded_devices() {
        let node = Node::a30();
        record(&node, "uid-a", ClaimState::PrepareCompleted);
        let request = physical_request("uid-a");
        let mut run = node.run(&request);
        LoadCheckpoint.run(&mut run).unwrap();
        let devices = run.outcome.expect("already prepared");
        assert_eq!(devices[0].cdi_device_ids, ["gpu.deckhouse.io/claim=uid-a-gpu0"]);
    }

    #[test]
    fn a_started_claim_is_rolled_back_before_preparing_again() {
        let node = Node::a30();
        record(&node, "uid-a", ClaimState::PrepareStarted);
        std::fs::create_dir_all(&node.config().cdi_dir).unwrap();
        std::fs::write(node.config().cdi_spec_path("uid-a"), "{}").unwrap();
        let request = physical_request("uid-a");
        let mut run = node.run(&request);
        LoadCheckpoint.run(&mut run).unwrap();
        assert!(run.outcome.is_none());
        assert!(run.checkpoint.claims.is_empty());
        assert!(node.store().load().unwrap().data.claims.is_empty());
        assert!(!node.config().cdi_spec_path("uid-a").exists());
    }
}
