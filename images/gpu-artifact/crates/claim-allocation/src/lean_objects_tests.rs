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

fn claim(allocated: bool) -> ResourceClaim {
    let mut value = json!({
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "creationTimestamp": "2026-11-28T18:00:00Z", "labels": {"app": "x"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "pu"}],
            "managedFields": [{"manager": "kubectl"}]},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mig",
            "allocationMode": "ExactCount", "count": 1,
            "selectors": [{"cel": {"expression": "device.attributes[\"gpu.deckhouse.io\"].migProfile == \"1g.6gb\""}}]}}]}}});
    if allocated {
        value["status"] = json!({
            "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0-mig-1g.6gb-0",
                    "shareID": "3f1c2b1e-5d6a-4c43-9a57-0d8e3c2b1a10", "consumedCapacity": {"memory": "6Gi"}, "tolerations": [{"key": "k", "operator": "Exists"}]}]},
                "allocationTimestamp": "2026-11-28T18:00:01Z",
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}],
            "devices": [{"driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0-mig-1g.6gb-0",
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-28T18:00:01Z", "reason": "r", "message": ""}],
                "data": {"uuid": "MIG-1"}}]});
    }
    serde_json::from_value(value).unwrap()
}

fn every_list_is_exact(claim: &ResourceClaim) -> bool {
    let status = claim.status.as_ref();
    let requests = claim.spec.devices.as_ref().and_then(|d| d.requests.as_ref()).unwrap();
    let results = status
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.as_ref());
    requests.capacity() == requests.len()
        && results.is_none_or(|r| r.capacity() == r.len())
        && claim
            .metadata
            .owner_references
            .as_ref()
            .is_some_and(|o| o.capacity() == o.len())
}

#[test]
fn an_unallocated_claim_keeps_its_whole_spec_in_exact_lists() {
    let mut lean = claim(false);
    lean_claim(&mut lean);
    let whole = claim(false);
    assert_eq!(lean.spec, whole.spec, "the engine allocates it from this spec");
    assert!(every_list_is_exact(&lean));
    assert_eq!(lean.metadata.labels, None);
    assert_eq!(lean.metadata.managed_fields, None);
    assert_eq!(lean.metadata.owner_references, whole.metadata.owner_references);
    assert_eq!(lean.metadata.creation_timestamp, whole.metadata.creation_timestamp);
}

#[test]
fn an_allocated_claim_keeps_which_devices_it_holds_and_its_requests_classes() {
    let mut lean = claim(true);
    lean_claim(&mut lean);
    let whole = claim(true);
    assert!(every_list_is_exact(&lean));
    let status = lean.status.as_ref().unwrap();
    let allocation = status.allocation.as_ref().unwrap();
    assert_eq!(
        serde_json::to_value(&allocation.devices).unwrap(),
        json!({"results": [{"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0-mig-1g.6gb-0",
            "shareID": "3f1c2b1e-5d6a-4c43-9a57-0d8e3c2b1a10"}]}),
        "the device and share, without what the share consumed or its tolerations"
    );
    assert_eq!(
        allocation.node_selector, None,
        "the round reads no node selector from the store"
    );
    let whole_allocation = whole.status.as_ref().unwrap().allocation.as_ref().unwrap();
    assert_eq!(allocation.allocation_timestamp, whole_allocation.allocation_timestamp);
    assert_eq!(status.reserved_for, whole.status.as_ref().unwrap().reserved_for);
    assert_eq!(
        serde_json::to_value(&status.devices).unwrap(),
        json!([{"driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0-mig-1g.6gb-0"}])
    );
    assert_eq!(
        serde_json::to_value(&lean.spec).unwrap(),
        json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mig"}}]}})
    );
}
