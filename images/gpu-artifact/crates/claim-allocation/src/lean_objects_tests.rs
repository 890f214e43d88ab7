use super::*;
use serde_json::json;

#[test]
fn a_pod_keeps_what_selection_reads() {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
            "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}}}],
            "overhead": {"cpu": "250m"}, "priority": 1000, "preemptionPolicy": "Never",
            "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
            "affinity": {"podAffinity": {}, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
            "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
        "status": {"phase": "Pending", "startTime": "2026-11-29T10:00:00Z",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                           {"type": "Ready", "status": "False"}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}}))
    .unwrap();
    lean_pod(&mut pod);
    assert_eq!(
        serde_json::to_value(&pod).unwrap(),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5"},
            "spec": {"containers": [], "priority": 1000, "preemptionPolicy": "Never",
                "resources": {"requests": {"cpu": "750m", "memory": "1073741824"}},
                "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
                "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"phase": "Pending", "startTime": "2026-11-29T10:00:00Z",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}})
    );
}

#[test]
fn a_bound_pod_keeps_no_node_constraints_and_no_scheduling_condition() {
    let mut pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "9"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            "nodeName": "n1", "priority": 10, "nodeSelector": {"zone": "a"},
            "tolerations": [{"operator": "Exists"},
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}]},
        "status": {"phase": "Running", "startTime": "2026-11-29T10:00:00Z",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c1"}]}}))
    .unwrap();
    lean_pod(&mut pod);
    assert_eq!(
        serde_json::to_value(&pod).unwrap(),
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "9"},
            "spec": {"containers": [], "nodeName": "n1", "priority": 10,
                "resources": {"requests": {"cpu": "1000m"}},
                "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}]},
            "status": {"phase": "Running", "startTime": "2026-11-29T10:00:00Z",
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c1"}]}})
    );
}

fn claim() -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "creationTimestamp": "2026-11-28T18:00:00Z", "labels": {"app": "x"},
            "finalizers": ["example.com/keep"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pu"}],
            "managedFields": [{"manager": "kubectl"}]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mig",
            "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": "device.attributes[\"gpu.deckhouse.io\"].migProfile == \"1g.6gb\""}}]}}]}}}))
    .unwrap()
}

fn every_list_is_exact(claim: &ResourceClaim) -> bool {
    let requests = claim.spec.devices.as_ref().and_then(|d| d.requests.as_ref()).unwrap();
    requests.capacity() == requests.len()
        && claim
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.capacity() == o.len())
}

#[test]
fn an_unallocated_claim_keeps_its_whole_spec_in_exact_lists() {
    let mut lean = claim();
    lean_claim(&mut lean);
    let whole = claim();
    assert_eq!(lean.spec, whole.spec, "the engine allocates it from this spec");
    assert!(every_list_is_exact(&lean));
    assert_eq!(lean.metadata.labels, None);
    assert_eq!(lean.metadata.managed_fields, None);
    assert_eq!(lean.metadata.owner_references, whole.metadata.owner_references);
    assert_eq!(lean.metadata.creation_timestamp, whole.metadata.creation_timestamp);
    assert_eq!(
        lean.metadata.finalizers, whole.metadata.finalizers,
        "written back beside the scheduler's finalizer"
    );
}
