//! What the controller's stores keep of each watched object: only what a round reads. Slices are
//! kept by nobody but the engine, in its compact form (see `controller::watch_slices`); the stores
//! keep of a Pod its claims, gates and scheduling state, and of every object no managedFields (the
//! largest part of most objects, read by nobody here).

use k8s_openapi::api::core::v1::{Affinity, Pod, PodSpec, PodStatus};
use kube::Resource;
use kube::core::ObjectMeta;

/// Drops managedFields: what every stored object loses.
pub fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps of a Pod what selection, the gate removal and the choice of its node read: its identity
/// and version, deletion, claims, scheduling gates, node constraints (name, selector, required node
/// affinity, tolerations), claim statuses and PodScheduled condition.
pub fn lean_pod(pod: &mut Pod) {
    let metadata = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        deletion_timestamp: metadata.deletion_timestamp,
        ..ObjectMeta::default()
    };
    let spec = pod.spec.take().unwrap_or_default();
    let node_affinity = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .map(|node_affinity| Affinity {
            node_affinity: Some(node_affinity),
            ..Affinity::default()
        });
    pod.spec = Some(PodSpec {
        resource_claims: spec.resource_claims,
        scheduling_gates: spec.scheduling_gates,
        node_name: spec.node_name,
        node_selector: spec.node_selector,
        affinity: node_affinity,
        tolerations: spec.tolerations,
        ..PodSpec::default()
    });
    let status = pod.status.take().unwrap_or_default();
    let conditions = status
        .conditions
        .map(|all| all.into_iter().filter(|c| c.type_ == "PodScheduled").collect());
    pod.status = Some(PodStatus {
        resource_claim_statuses: status.resource_claim_statuses,
        conditions,
        ..PodStatus::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_keeps_what_selection_reads() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
                "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "n1",
                "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
                "affinity": {"podAffinity": {}, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
                "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                               {"type": "Ready", "status": "False"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}}))
        .unwrap();
        lean_pod(&mut pod);
        assert_eq!(
            serde_json::to_value(&pod).unwrap(),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5"},
                "spec": {"containers": [], "nodeName": "n1",
                    "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
                    "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
                    "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}})
        );
    }
}
