//! Bad input gets a clear answer: unknown classes, CEL errors (with the CEL text), claims nothing
//! can satisfy (with a short reason), malformed foreign slices and invalid pools (ignored and
//! counted), and the safety audit naming the claim that broke an invariant.

use dra_allocator::{AllocationError, Allocator};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// One A30 on node-a: Physical `gpu0` and a MIG offer, sharing the card's counter set (1.34 layout).
fn a30_slice() -> ResourceSlice {
    let dev = |name: &str, kind: &str, slices: &[u32]| {
        let mut counters = json!({});
        for i in slices {
            counters[format!("memory-slice-{i}")] = json!({"value": "1"});
        }
        json!({"name": name, "attributes": {"deviceType": {"string": kind}},
               "capacity": {"memory": {"value": "24Gi"}},
               "consumesCounters": [{"counterSet": "pgpu-0000-3b-00-0", "counters": counters}]})
    };
    from(json!({"metadata": {"name": "node-a-gpu0"}, "spec": {
        "driver": "gpu.deckhouse.io", "nodeName": "node-a", "pool": {"name": "gpus/node-a", "generation": 1, "resourceSliceCount": 1},
        "sharedCounters": [{"name": "pgpu-0000-3b-00-0", "counters": {"memory-slice-0": {"value": "1"}, "memory-slice-1": {"value": "1"}}}],
        "devices": [dev("gpu0", "Physical", &[0, 1]), dev("gpu0-mig-1g6gb-0", "MIG", &[0])]}}))
}

fn class(name: &str, expression: &str) -> DeviceClass {
    from(json!({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}}))
}

fn claim(name: &str, class: &str, selector: Option<&str>) -> ResourceClaim {
    let mut exactly = json!({"deviceClassName": class, "allocationMode": "ExactCount", "count": 1});
    if let Some(s) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": s}}]);
    }
    from(
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
    )
}

fn gpu_class() -> DeviceClass {
    class("gpu", r#"device.driver == "gpu.deckhouse.io""#)
}

#[test]
fn an_unknown_class_is_named() {
    let mut allocator = Allocator::new(&[a30_slice()], &[gpu_class()], &[]);
    let err = allocator.allocate(&claim("c", "missing", None), None).unwrap_err();
    assert!(
        matches!(&err, AllocationError::UnknownClass { class, .. } if class == "missing"),
        "{err}"
    );
    assert!(err.to_string().contains("default/c"), "{err}");
}

#[test]
fn a_class_cel_compile_error_carries_the_cel_text() {
    let mut allocator = Allocator::new(&[a30_slice()], &[class("broken", "device.driver ==")], &[]);
    let err = allocator.allocate(&claim("c", "broken", None), None).unwrap_err();
    assert!(matches!(err, AllocationError::ClassSelector { .. }), "{err}");
    assert!(err.cel_error().is_some());
    assert!(
        err.to_string().contains("CEL compile error") && err.to_string().contains("device.driver =="),
        "{err}"
    );
}

#[test]
fn a_claim_cel_runtime_error_carries_the_cel_text() {
    let mut allocator = Allocator::new(&[a30_slice()], &[gpu_class()], &[]);
    let selector = r#"device.attributes["gpu.deckhouse.io"].uuid == "x""#;
    let err = allocator
        .allocate(&claim("c", "gpu", Some(selector)), None)
        .unwrap_err();
    assert!(matches!(err, AllocationError::ClaimSelector { .. }), "{err}");
    assert!(
        err.to_string().contains("CEL runtime error") && err.to_string().contains("uuid"),
        "{err}"
    );
}

#[test]
fn a_claim_nothing_satisfies_gets_a_short_reason() {
    let mut allocator = Allocator::new(&[a30_slice()], &[gpu_class()], &[]);
    let none = allocator
        .allocate(
            &claim(
                "c",
                "gpu",
                Some(r#"device.attributes["gpu.deckhouse.io"].deviceType == "vGPU""#),
            ),
            None,
        )
        .unwrap();
    assert!(none.is_none());
    let reason = allocator.unsatisfiable_reason().unwrap();
    assert!(reason.contains("no device matches class gpu"), "{reason}");
}

#[test]
fn physical_and_mig_of_one_card_exclude_each_other() {
    let mut allocator = Allocator::new(&[a30_slice()], &[gpu_class()], &[]);
    let mig = r#"device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#;
    let first = allocator
        .allocate(&claim("mig", "gpu", Some(mig)), None)
        .unwrap()
        .unwrap();
    allocator.commit(&first);
    let whole = allocator.allocate(&claim("whole", "gpu", None), None).unwrap();
    assert!(whole.is_none(), "the card is partitioned: {whole:?}");
    assert!(
        allocator
            .unsatisfiable_reason()
            .unwrap()
            .contains("not enough are free")
    );
}

#[test]
fn best_fit_prefers_the_smallest_offer() {
    let mut allocator = Allocator::new(&[a30_slice()], &[gpu_class()], &[]);
    let result = allocator.allocate(&claim("c", "gpu", None), None).unwrap().unwrap();
    let device = &result.devices.unwrap().results.unwrap()[0].device;
    assert_eq!(
        device, "gpu0-mig-1g6gb-0",
        "the MIG offer uses one memory slice, the card two"
    );
}

#[test]
fn malformed_foreign_slices_are_ignored_and_counted() {
    let foreign: ResourceSlice = from(json!({"metadata": {"name": "nic-1"}, "spec": {
        "driver": "nic.example.com", "nodeName": "node-a", "pool": {"name": "nics", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "eth0", "consumesCounters": [{"counterSet": "nowhere", "counters": {"x": {"value": "1"}}}]}]}}));
    let mut allocator = Allocator::new(&[a30_slice(), foreign], &[gpu_class()], &[]);
    assert_eq!(allocator.ignored_slices().len(), 1);
    assert_eq!(allocator.ignored_slices()[0].driver, "nic.example.com");
    assert!(
        allocator.ignored_slices()[0]
            .reason
            .contains("unknown counter set nowhere")
    );
    assert!(
        allocator.allocate(&claim("c", "gpu", None), None).unwrap().is_some(),
        "our pool still works"
    );
}

#[test]
fn a_pool_repeating_a_device_name_across_slices_is_never_allocated_from() {
    // gpus/node-b lists gpu0 in two slices (the API server allows that across slices); which of
    // the two is meant is unknowable, so the scheduler calls the pool invalid.
    let slice = |name: &str, device: &str| -> ResourceSlice {
        from(json!({"metadata": {"name": name}, "spec": {
            "driver": "gpu.deckhouse.io", "nodeName": "node-b", "pool": {"name": "gpus/node-b", "generation": 1, "resourceSliceCount": 2},
            "devices": [{"name": device, "attributes": {"deviceType": {"string": "Physical"}}}]}}))
    };
    let invalid = [slice("node-b-1", "gpu0"), slice("node-b-2", "gpu0")];
    let physical = r#"device.attributes["gpu.deckhouse.io"].deviceType == "Physical""#;
    let mut alone = Allocator::new(&invalid, &[gpu_class()], &[]);
    assert_eq!(alone.allocate(&claim("c", "gpu", Some(physical)), None).unwrap(), None);
    let pools = alone.ignored_pools();
    assert_eq!(pools.len(), 1);
    assert_eq!(
        (pools[0].driver.as_str(), pools[0].pool.as_str()),
        ("gpu.deckhouse.io", "gpus/node-b")
    );
    assert!(
        pools[0]
            .reason
            .contains("device gpu0 is listed in slices node-b-1 and node-b-2"),
        "{}",
        pools[0].reason
    );
    let ignored: Vec<String> = alone.ignored_slices().into_iter().map(|s| s.slice).collect();
    assert_eq!(ignored, ["node-b-1", "node-b-2"]);

    let mut beside = Allocator::new(
        &[invalid[0].clone(), a30_slice(), invalid[1].clone()],
        &[gpu_class()],
        &[],
    );
    let result = beside
        .allocate(&claim("c", "gpu", Some(physical)), None)
        .unwrap()
        .unwrap();
    assert_eq!(result.devices.unwrap().results.unwrap()[0].pool, "gpus/node-a");
}

#[test]
fn the_audit_names_a_mig_allocation_beside_a_physical_one() {
    let allocator = Allocator::new(&[a30_slice()], &[gpu_class()], &[]);
    let allocated = |name: &str, device: &str| -> ResourceClaim {
        from(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {},
            "status": {"allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "gpus/node-a", "device": device}]}}}}))
    };
    let violations = allocator.audit(&[allocated("whole", "gpu0"), allocated("part", "gpu0-mig-1g6gb-0")]);
    assert!(!violations.is_empty());
    assert_eq!(violations[0].claim, "default/part");
    assert_eq!(
        violations[0].holders,
        ["default/whole"],
        "the claim already on that card"
    );
    assert!(
        violations[0].reason.contains("MIG allocation on a card"),
        "{}",
        violations[0]
    );
    assert!(allocator.audit(&[allocated("whole", "gpu0")]).is_empty());
}
