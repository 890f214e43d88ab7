//! Every write of the controller, each behind the leadership fence and a resourceVersion
//! precondition: an allocation written never overwrites another writer's (a conflict keeps theirs),
//! a deallocation never clears an allocation that changed since the audit saw it, and our gate is
//! removed from a Pod only as we read it.
//!
//! An allocation is written as kube-scheduler writes one (`bindClaim` in
//! `pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`, v1.34.4): first the
//! finalizer `resource.kubernetes.io/delete-protection` in a normal update, then the allocation in
//! the status, each at the version the previous write returned. kube-controller-manager's
//! resourceclaim controller deallocates only claims that carry that finalizer (`syncClaim` in
//! `pkg/controller/resourceclaim/controller.go`): without it a claim in use could be deleted at once
//! and its device would look free while a Pod still runs on it.

use gpu_api::labels::ALLOCATION_GATE_LABEL;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::ObjectMeta;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;

use crate::FIELD_MANAGER;
use crate::fencing::Fence;
use crate::lean_pod::LeanPod;
use crate::selection::SCHEDULING_GATE;
use crate::stored_claims::AllocatedClaim;

/// What became of a write.
pub enum Written {
    /// Stored; the claim as the API server returned it.
    Yes(Box<ResourceClaim>),
    /// The object changed since we read it (another writer); nothing was written.
    Conflict,
}

pub struct ClaimWrites<'a> {
    pub client: &'a Client,
    /// `None` without leader election (one replica).
    pub fence: Option<&'a Fence>,
}

impl ClaimWrites<'_> {
    /// Fails with [`NotLeading`](crate::fencing::NotLeading) unless this replica's term holds.
    pub(crate) async fn fenced(&self) -> anyhow::Result<()> {
        if let Some(fence) = self.fence {
            fence.before_write().await?;
        }
        Ok(())
    }

    fn claims(&self, claim: &ResourceClaim) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default())
    }

    /// Writes the scheduler's finalizer, if the claim lacks it, then `status.allocation`, each
    /// against the resourceVersion the step before read or wrote (merge patches of those fields
    /// alone: the store keeps a lean copy of the claim, which must not be written back). A claim
    /// that changed in between is someone else's: nothing more is written. The fence is checked
    /// right before the allocation: a finalizer a replica wrote after its term ended is harmless
    /// (the next allocation would add it anyway).
    pub async fn allocation(&self, claim: &ResourceClaim, allocation: &AllocationResult) -> anyhow::Result<Written> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        let mut version = claim.resource_version().unwrap_or_default();
        if let Some(patch) = finalizer_patch(&claim.metadata) {
            match conflict_is_no(
                self.claims(claim)
                    .patch(&claim.name_any(), &params, &Patch::Merge(&patch))
                    .await,
            )? {
                Written::Yes(stored) => version = stored.resource_version().unwrap_or_default(),
                Written::Conflict => return Ok(Written::Conflict),
            }
        }
        self.fenced().await?;
        let patch = allocation_patch(&version, allocation, Timestamp::now());
        conflict_is_no(
            self.claims(claim)
                .patch_status(&claim.name_any(), &params, &Patch::Merge(&patch))
                .await,
        )
    }

    /// Clears `status.allocation` of a claim as the audit saw it (`resourceVersion` precondition),
    /// so it is allocated again.
    pub async fn deallocation(&self, claim: &AllocatedClaim) -> anyhow::Result<Written> {
        self.fenced().await?;
        let patch = deallocation_patch(&claim.resource_version);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        conflict_is_no(
            Api::<ResourceClaim>::namespaced(self.client.clone(), &claim.namespace)
                .patch_status(&claim.name, &params, &Patch::Merge(&patch))
                .await,
        )
    }

    /// Removes our gate, keeping the others, and the label that lists the Pod as gated, guarded by
    /// the Pod's resourceVersion. A conflict is fine: the next round sees the Pod again.
    pub async fn ungate(&self, pod: &LeanPod) -> anyhow::Result<()> {
        self.fenced().await?;
        let remaining: Vec<_> = pod
            .gates
            .iter()
            .filter(|g| *g != SCHEDULING_GATE)
            .map(|g| json!({"name": g}))
            .collect();
        let patch = json!({"metadata": {"resourceVersion": pod.resource_version(), "labels": {ALLOCATION_GATE_LABEL: null}},
                "spec": {"schedulingGates": remaining}});
        let api = Api::<Pod>::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        match api
            .patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Writes `status.nominatedNodeName` of a preemptor, as the kube-scheduler nominates one
    /// (`handleSchedulingFailure` then `updatePod` in `pkg/scheduler/schedule_one.go`, v1.34.4): the
    /// node its victims leave. gpu-controller's gate lifter gives a nominated Pod longer, and the
    /// scheduler prefers that node if the gate is lifted all the same.
    pub async fn nominate<P: Resource>(&self, pod: &P, node: &str) -> anyhow::Result<()> {
        self.fenced().await?;
        let patch = json!({"status": {"nominatedNodeName": node}});
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
        Api::<Pod>::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default())
            .patch_status(&pod.name_any(), &params, &Patch::Merge(&patch))
            .await?;
        Ok(())
    }
}

/// The finalizer kube-scheduler puts on every claim before it writes the claim's allocation, and
/// kube-controller-manager removes once it deallocated the claim (`resourceapi.Finalizer`).
pub const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// The merge patch that adds [`DELETE_PROTECTION`] to a claim's finalizers as they were read (a
/// merge patch replaces the list, so the others are written back, at the version read); `None`
/// when the claim has it already (the scheduler's retry does the same: an earlier attempt may
/// have added it).
pub fn finalizer_patch(read: &ObjectMeta) -> Option<serde_json::Value> {
    let mut finalizers = read.finalizers.clone().unwrap_or_default();
    if finalizers.iter().any(|f| f == DELETE_PROTECTION) {
        return None;
    }
    finalizers.push(DELETE_PROTECTION.to_owned());
    Some(json!({"metadata": {"resourceVersion": read.resource_version, "finalizers": finalizers}}))
}

/// The merge patch that sets a claim's allocation only at `resource_version`. The scheduler stamps
/// every allocation it makes; on servers with binding conditions (1.36+) it adds a missing stamp
/// at PreBind, which the API server refuses as a change of the allocation. So an allocation we
/// write carries its stamp from the start (servers without the gate drop the field).
pub fn allocation_patch(resource_version: &str, allocation: &AllocationResult, now: Timestamp) -> serde_json::Value {
    let mut allocation = allocation.clone();
    allocation.allocation_timestamp = Some(Time(now));
    json!({"metadata": {"resourceVersion": resource_version}, "status": {"allocation": allocation}})
}

/// The merge patch that clears a claim's allocation only at the resourceVersion it was read at.
pub fn deallocation_patch(resource_version: &str) -> serde_json::Value {
    json!({"metadata": {"resourceVersion": resource_version}, "status": {"allocation": null}})
}

fn conflict_is_no(result: Result<ResourceClaim, kube::Error>) -> anyhow::Result<Written> {
    match result {
        Ok(stored) => Ok(Written::Yes(Box::new(stored))),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Written::Conflict),
        Err(error) => Err(error.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::claim;

    #[test]
    fn an_allocation_is_bound_to_the_version_read_and_stamped() {
        let allocation: AllocationResult = serde_json::from_value(json!({"devices": {"results": [
            {"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0"}]}}))
        .unwrap();
        let now: Timestamp = "2026-11-28T19:00:00Z".parse().unwrap();
        assert_eq!(
            allocation_patch("42", &allocation, now),
            json!({"metadata": {"resourceVersion": "42"}, "status": {"allocation": {
                "allocationTimestamp": "2026-11-28T19:00:00Z",
                "devices": {"results": [{"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0"}]}}}})
        );
    }

    #[test]
    fn the_finalizer_is_added_beside_the_others_at_the_version_read() {
        let mut read = claim("a", "gpu-physical", 1, 42);
        assert_eq!(
            finalizer_patch(&read.metadata),
            Some(json!({"metadata": {"resourceVersion": "42", "finalizers": [DELETE_PROTECTION]}}))
        );
        read.metadata.finalizers = Some(vec!["example.com/keep".into()]);
        assert_eq!(
            finalizer_patch(&read.metadata),
            Some(json!({"metadata": {"resourceVersion": "42",
                "finalizers": ["example.com/keep", DELETE_PROTECTION]}}))
        );
        read.metadata.finalizers = Some(vec![DELETE_PROTECTION.into(), "example.com/keep".into()]);
        assert_eq!(finalizer_patch(&read.metadata), None, "added by an earlier attempt");
    }

    #[test]
    fn a_deallocation_is_bound_to_the_version_the_audit_saw() {
        assert_eq!(
            deallocation_patch(&AllocatedClaim::of(&claim("a", "gpu-physical", 1, 42)).resource_version),
            json!({"metadata": {"resourceVersion": "42"}, "status": {"allocation": null}})
        );
    }
}
