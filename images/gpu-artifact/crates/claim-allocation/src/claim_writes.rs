//! Every write of the controller, each behind the leadership fence and a resourceVersion
//! precondition: an allocation written never overwrites another writer's (a conflict keeps theirs),
//! a deallocation never clears an allocation that changed since the audit saw it, and our gate is
//! removed from a Pod only as we read it.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::FIELD_MANAGER;
use crate::fencing::Fence;
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
    async fn fenced(&self) -> anyhow::Result<()> {
        if let Some(fence) = self.fence {
            fence.before_write().await?;
        }
        Ok(())
    }

    fn claims(&self, claim: &ResourceClaim) -> Api<ResourceClaim> {
        Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default())
    }

    /// Writes `status.allocation` against the resourceVersion we read (a merge patch of the
    /// allocation alone: the store keeps a lean copy of the claim, which must not be written back).
    pub async fn allocation(&self, claim: &ResourceClaim, allocation: &AllocationResult) -> anyhow::Result<Written> {
        self.fenced().await?;
        let patch = allocation_patch(claim, allocation, Timestamp::now());
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        };
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

    /// Removes our gate, keeping the others, guarded by the Pod's resourceVersion. A conflict is
    /// fine: the next round sees the Pod again.
    pub async fn ungate(&self, pod: &Pod) -> anyhow::Result<()> {
        self.fenced().await?;
        let remaining: Vec<_> = pod
            .spec
            .iter()
            .flat_map(|s| s.scheduling_gates.iter().flatten())
            .filter(|g| g.name != SCHEDULING_GATE)
            .cloned()
            .collect();
        let patch =
            json!({"metadata": {"resourceVersion": pod.resource_version()}, "spec": {"schedulingGates": remaining}});
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
}

/// The merge patch that sets a claim's allocation only at the resourceVersion it was read at. The
/// scheduler stamps every allocation it makes; on servers with binding conditions (1.36+) it adds
/// a missing stamp at PreBind, which the API server refuses as a change of the allocation. So an
/// allocation we write carries its stamp from the start (servers without the gate drop the field).
pub fn allocation_patch(claim: &ResourceClaim, allocation: &AllocationResult, now: Timestamp) -> serde_json::Value {
    let mut allocation = allocation.clone();
    allocation.allocation_timestamp = Some(Time(now));
    json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": {"allocation": allocation}})
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
            allocation_patch(&claim("a", "gpu-physical", 1, 42), &allocation, now),
            json!({"metadata": {"resourceVersion": "42"}, "status": {"allocation": {
                "allocationTimestamp": "2026-11-28T19:00:00Z",
                "devices": {"results": [{"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0"}]}}}})
        );
    }

    #[test]
    fn a_deallocation_is_bound_to_the_version_the_audit_saw() {
        assert_eq!(
            deallocation_patch(&AllocatedClaim::of(&claim("a", "gpu-physical", 1, 42)).resource_version),
            json!({"metadata": {"resourceVersion": "42"}, "status": {"allocation": null}})
        );
    }
}
