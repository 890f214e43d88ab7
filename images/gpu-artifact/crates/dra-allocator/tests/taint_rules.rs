//! Admin DeviceTaintRules: a device a rule selects carries the rule's taint, as the kube-scheduler's
//! ResourceSlice tracker patches it in (`resourceslice/tracker`, `applyPatches`), so a request that
//! does not tolerate it never gets the device, and the explanation names the rule.

use dra_allocator::{Allocator, RequestProblem, TaintRule};
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::resource::v1alpha3::DeviceTaintRule;
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// Node `node` with one GPU `gpu0` of `model`, in pool `gpus/<node>`.
fn node_slice(node: &str, model: &str) -> ResourceSlice {
    from(json!({"metadata": {"name": format!("{node}-gpus")}, "spec": {
        "driver": "gpu.deckhouse.io", "nodeName": node,
        "pool": {"name": format!("gpus/{node}"), "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu0", "attributes": {"model": {"string": model}},
                     "capacity": {"memory": {"value": "24Gi"}}}]}}))
}

fn gpu_class() -> DeviceClass {
    from(json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [
        {"cel": {"expression": "device.driver == \"gpu.deckhouse.io\""}}]}}))
}

fn claim(tolerations: Value) -> ResourceClaim {
    from(
        json!({"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1,
                                    "tolerations": tolerations}}]}}}),
    )
}

/// A 1.34 rule (`resource.k8s.io/v1alpha3`) with `selector` and a NoSchedule `maintenance` taint.
fn rule(name: &str, selector: Value) -> TaintRule {
    let rule: DeviceTaintRule = from(json!({"metadata": {"name": name}, "spec": {
        "deviceSelector": selector, "taint": {"key": "maintenance", "value": "planned", "effect": "NoSchedule"}}}));
    TaintRule::from_v1alpha3(&rule)
}

fn engine(rules: Vec<TaintRule>) -> Allocator {
    let slices = [node_slice("node-a", "A30"), node_slice("node-b", "A100")];
    let mut allocator = Allocator::new(&slices, &[gpu_class()], &[]);
    allocator.set_taint_rules(rules);
    allocator
}

/// The pools the allocation took its devices from.
fn pools(result: Option<AllocationResult>) -> Vec<String> {
    let result = result.expect("an allocation");
    result
        .devices
        .unwrap()
        .results
        .into_iter()
        .flatten()
        .map(|r| r.pool)
        .collect()
}

fn on_node_a() -> Value {
    json!({"driver": "gpu.deckhouse.io", "pool": "gpus/node-a", "device": "gpu0"})
}

#[test]
fn a_noschedule_rule_on_one_device_keeps_an_untolerating_request_off_it() {
    let mut allocator = engine(vec![rule("drain-a", on_node_a())]);
    for _ in 0..3 {
        let result = allocator.allocate(&claim(json!([])), None).unwrap();
        assert_eq!(pools(result), ["gpus/node-b"]);
    }
}

#[test]
fn a_toleration_admits_the_tainted_device() {
    let mut allocator = engine(vec![rule("drain-b", json!({"pool": "gpus/node-b"}))]);
    let tolerating = json!([{"key": "maintenance", "operator": "Equal", "value": "planned", "effect": "NoSchedule"}]);
    let node_b = allocator
        .allocate_among(&claim(tolerating), &|node| node == "node-b")
        .unwrap();
    assert_eq!(pools(node_b), ["gpus/node-b"]);
    let untolerating = allocator
        .allocate_among(&claim(json!([])), &|node| node == "node-b")
        .unwrap();
    assert_eq!(untolerating, None);
}

#[test]
fn a_rule_on_a_driver_taints_every_device_of_it_and_is_named() {
    let mut allocator = engine(vec![rule("drain-all", json!({"driver": "gpu.deckhouse.io"}))]);
    assert_eq!(allocator.allocate(&claim(json!([])), None).unwrap(), None);
    let explanation = allocator.explain(&claim(json!([])), 5).unwrap().expect("no fit");
    for node in &explanation.nodes {
        assert_eq!(
            node.problems,
            [RequestProblem::Tainted {
                request: "gpu".into(),
                taints: vec!["DeviceTaintRule drain-all".into()]
            }],
            "{explanation:?}"
        );
        assert!(node.problems[0].to_string().contains("DeviceTaintRule drain-all"));
    }
    allocator.set_taint_rules(vec![]);
    assert!(allocator.allocate(&claim(json!([])), None).unwrap().is_some());
}

#[test]
fn a_rule_that_selects_nothing_changes_nothing() {
    let other_driver = rule("other", json!({"driver": "gpu.example.com"}));
    let other_device = rule("gpu9", json!({"device": "gpu9"}));
    let no_class = rule("no-class", json!({"deviceClassName": "missing"}));
    let mut allocator = engine(vec![other_driver, other_device, no_class]);
    let everywhere = |node: &str| node == "node-a";
    assert_eq!(
        pools(allocator.allocate_among(&claim(json!([])), &everywhere).unwrap()),
        ["gpus/node-a"]
    );
}

#[test]
fn cel_and_class_selectors_of_a_1_34_rule_select_as_the_scheduler_does() {
    let a30 = rule(
        "a30",
        json!({"selectors": [{"cel": {"expression": "device.attributes[\"gpu.deckhouse.io\"].model == \"A30\""}}]}),
    );
    let mut allocator = engine(vec![a30]);
    assert_eq!(
        pools(allocator.allocate(&claim(json!([])), None).unwrap()),
        ["gpus/node-b"]
    );
    let by_class = rule("by-class", json!({"deviceClassName": "gpu", "pool": "gpus/node-b"}));
    allocator.set_taint_rules(vec![by_class]);
    assert_eq!(
        pools(allocator.allocate(&claim(json!([])), None).unwrap()),
        ["gpus/node-a"]
    );
}

#[test]
fn a_1_37_rule_without_a_selector_selects_nothing_a_1_34_one_everything() {
    let spec = from(json!({"taint": {"key": "k", "effect": "NoSchedule"}}));
    let mut allocator = engine(vec![TaintRule::from_v1("empty", &spec)]);
    assert!(allocator.allocate(&claim(json!([])), None).unwrap().is_some());
    allocator.set_taint_rules(vec![rule("all", Value::Null)]);
    assert_eq!(allocator.allocate(&claim(json!([])), None).unwrap(), None);
}

#[test]
fn a_slice_arriving_after_the_rule_is_tainted_too() {
    let mut allocator = Allocator::new(&[], &[gpu_class()], &[]);
    allocator.set_taint_rules(vec![rule("drain-a", on_node_a())]);
    allocator.apply_slice(&node_slice("node-a", "A30"));
    assert_eq!(allocator.allocate(&claim(json!([])), None).unwrap(), None);
    allocator.apply_slice(&node_slice("node-b", "A100"));
    assert_eq!(
        pools(allocator.allocate(&claim(json!([])), None).unwrap()),
        ["gpus/node-b"]
    );
}

#[test]
fn a_1_34_rule_whose_cel_does_not_compile_keeps_every_device_it_reaches_unused() {
    // Upstream's tracker fails to patch such a slice, so the scheduler does not see its devices.
    let broken = rule(
        "broken",
        json!({"pool": "gpus/node-a", "selectors": [{"cel": {"expression": "device.driver =="}}]}),
    );
    let mut allocator = engine(vec![broken]);
    let tolerating = json!([{"operator": "Exists"}]);
    for tolerations in [json!([]), tolerating] {
        let on_a = allocator.allocate_among(&claim(tolerations.clone()), &|node| node == "node-a");
        assert_eq!(on_a.unwrap(), None);
        let anywhere = allocator.allocate(&claim(tolerations), None).unwrap();
        assert_eq!(pools(anywhere), ["gpus/node-b"]);
    }
}

#[test]
fn only_noschedule_and_noexecute_keep_a_request_off_a_device() {
    // 1.37's `taintPreventsAllocation`: other effects (`None`, the handler's notes) are ignored.
    let mut noted = node_slice("node-a", "A30");
    let device = &mut noted.spec.devices.as_mut().unwrap()[0];
    device.taints = Some(vec![from(json!({"key": "gpu.deckhouse.io/note", "effect": "None"}))]);
    let mut allocator = Allocator::new(&[noted], &[gpu_class()], &[]);
    assert_eq!(
        pools(allocator.allocate(&claim(json!([])), None).unwrap()),
        ["gpus/node-a"]
    );
    let none_rule: DeviceTaintRule = from(json!({"metadata": {"name": "note"}, "spec": {
        "deviceSelector": {"pool": "gpus/node-a"}, "taint": {"key": "k", "effect": "None"}}}));
    allocator.set_taint_rules(vec![TaintRule::from_v1alpha3(&none_rule)]);
    assert_eq!(
        pools(allocator.allocate(&claim(json!([])), None).unwrap()),
        ["gpus/node-a"]
    );
}

#[test]
fn a_1_34_rule_sees_devices_without_allow_multiple_allocations_as_the_tracker_does() {
    // `applyPatches` hands CEL a `cel.Device` without AllowMultipleAllocations (read as false),
    // so a class selecting shared devices selects none of them for a rule.
    let mut shared = node_slice("node-a", "A30");
    shared.spec.devices.as_mut().unwrap()[0].allow_multiple_allocations = Some(true);
    let shared_class: DeviceClass = from(json!({"metadata": {"name": "shared"}, "spec": {"selectors": [
        {"cel": {"expression": "device.allowMultipleAllocations"}}]}}));
    let mut allocator = Allocator::new(&[shared], &[gpu_class(), shared_class], &[]);
    allocator.set_taint_rules(vec![rule("by-shared-class", json!({"deviceClassName": "shared"}))]);
    assert_eq!(
        pools(allocator.allocate(&claim(json!([])), None).unwrap()),
        ["gpus/node-a"]
    );
}
