use super::*;
use serde_json::json;

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
