use super::*;
use serde_json::json;

use crate::double_allocation::ClaimFacts;

fn allocated() -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7",
            "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu-mig", "count": 1,
                "selectors": [{"cel": {"expression": "device.attributes[\"gpu.deckhouse.io\"].migProfile == \"1g.6gb\""}}]}},
            {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "a100"}, {"name": "small", "deviceClassName": "a30"}]},
            {"name": "nic", "exactly": {"deviceClassName": "nic"}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [
                    {"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-0-mig-1g.6gb-0",
                        "shareID": "3f1c2b1e-5d6a-4c43-9a57-0d8e3c2b1a10", "consumedCapacity": {"memory": "6Gi"}},
                    {"request": "alt/small", "driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-1"},
                    {"request": "nic", "driver": "net.example.com", "pool": "n1", "device": "eth0"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
                "allocationTimestamp": "2026-11-28T18:00:01Z"},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": "pu"}],
            "devices": [{"driver": "gpu.deckhouse.io", "pool": "n1", "device": "gpu-1", "data": {"uuid": "GPU-1"}}]}}))
    .unwrap()
}

#[test]
fn an_allocated_claim_keeps_who_it_is_what_it_holds_of_ours_and_its_classes() {
    let stored = StoredClaim::of(allocated());
    assert!(stored.pending().is_none());
    let claim = stored.allocated().expect("an allocated record");
    let held = |request: &str, device: &str| HeldDevice {
        request: request.into(),
        pool: "n1".into(),
        device: device.into(),
    };
    assert_eq!(
        **claim,
        AllocatedClaim {
            namespace: "ns".into(),
            name: "c".into(),
            uid: "u".into(),
            resource_version: "7".into(),
            facts: ClaimFacts {
                reserved: true,
                prepared: true,
                allocated_at: Some("2026-11-28T18:00:01Z".parse().unwrap()),
            },
            held: Box::new([held("gpu", "gpu-0-mig-1g.6gb-0"), held("alt/small", "gpu-1")]),
            classes: Box::new([
                ("gpu".into(), "gpu-mig".into()),
                ("alt/big".into(), "a100".into()),
                ("alt/small".into(), "a30".into()),
                ("nic".into(), "nic".into()),
            ]),
            reservers: Box::new(["pu".into()]),
        },
        "the other driver's result is left out"
    );
    assert_eq!(claim.class_of("alt/small"), Some("a30"));
    assert_eq!(claim.class_of("gone"), None);
    assert_eq!(
        (stored.namespace(), stored.name(), stored.id()),
        ("ns", "c", "u".to_owned())
    );
}

#[test]
fn an_allocated_claim_is_referred_to_as_kube_refers_to_the_whole_claim() {
    let whole = allocated();
    let stored = AllocatedClaim::of(&whole);
    assert_eq!(stored.reference(), whole.object_ref(&()));
    assert_eq!(stored.key(), "ns/c");
}

#[test]
fn a_claim_not_allocated_is_kept_lean_and_whole_in_spec() {
    let mut whole = allocated();
    whole.status = None;
    let stored = StoredClaim::of(whole.clone());
    let pending = stored.pending().expect("a pending claim");
    assert_eq!(pending.spec, whole.spec, "the engine allocates it from this spec");
    assert_eq!(pending.metadata.managed_fields, None, "lean");
    assert!(stored.allocated().is_none());
}
