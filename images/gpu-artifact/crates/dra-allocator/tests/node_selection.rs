//! Devices behind a node selector, for claims allocated without a node (standalone claims) and
//! with one: the result's node selector says where Pods using the claim may run, as the
//! scheduler's `createNodeSelector` builds it (a node-local device pins the node, selectors are
//! merged, all-nodes devices add nothing), and a node never gets a device it may not reach.

use dra_allocator::Allocator;
use k8s_openapi::api::core::v1::{Node, NodeSelector};
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// A slice of one device `name` in its own pool, bound by `binding` (`nodeName`, `nodeSelector`
/// or `allNodes` as JSON fields).
fn slice(name: &str, binding: Value) -> ResourceSlice {
    let mut spec = json!({"driver": "gpu.deckhouse.io", "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": name, "attributes": {"id": {"string": name}}}]});
    for (k, v) in binding.as_object().unwrap() {
        spec[k] = v.clone();
    }
    from(json!({"metadata": {"name": name}, "spec": spec}))
}

fn by_label() -> Value {
    json!({"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]})
}

fn by_name() -> Value {
    // A field selector takes exactly one value (nodeaffinity rejects more).
    json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]})
}

fn selector(term: Value) -> Value {
    json!({"nodeSelector": {"nodeSelectorTerms": [term]}})
}

fn pinned(node: &str) -> NodeSelector {
    from(selector(json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}))["nodeSelector"].clone())
}

fn class() -> DeviceClass {
    from(json!({"metadata": {"name": "gpu"}, "spec": {}}))
}

/// One request per device id.
fn claim(devices: &[&str]) -> ResourceClaim {
    let requests: Vec<Value> = devices
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let selector = format!("device.attributes[\"gpu.deckhouse.io\"].id == \"{id}\"");
            json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                "count": 1, "selectors": [{"cel": {"expression": selector}}]}})
        })
        .collect();
    from(json!({"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": requests}}}))
}

fn node(name: &str, labels: Value) -> Node {
    from(json!({"metadata": {"name": name, "labels": labels}}))
}

fn allocate(slices: &[ResourceSlice], devices: &[&str], node: Option<&Node>) -> Option<AllocationResult> {
    Allocator::new(slices, &[class()], &[])
        .allocate(&claim(devices), node)
        .unwrap()
}

#[test]
fn selector_devices_without_a_node_carry_the_slice_selector() {
    let slices = [
        slice("rack-gpu", selector(by_label())),
        slice("everywhere", json!({"allNodes": true})),
    ];
    let result = allocate(&slices, &["rack-gpu", "everywhere"], None).expect("reachable without a node");
    let expected: NodeSelector = from(selector(by_label())["nodeSelector"].clone());
    assert_eq!(result.node_selector, Some(expected));
}

#[test]
fn selector_devices_are_used_beside_node_local_ones_when_the_name_proves_the_match() {
    let slices = [
        slice("local", json!({"nodeName": "node-a"})),
        slice("rack-gpu", selector(by_name())),
    ];
    let result = allocate(&slices, &["local", "rack-gpu"], None).expect("node-a is named by the selector");
    assert_eq!(result.node_selector, Some(pinned("node-a")));
    let elsewhere = [
        slice("local", json!({"nodeName": "node-c"})),
        slice("rack-gpu", selector(by_name())),
    ];
    assert!(
        allocate(&elsewhere, &["local", "rack-gpu"], None).is_none(),
        "node-c is not named"
    );
}

#[test]
fn without_labels_a_label_selector_device_is_not_joined_with_a_node() {
    let slices = [
        slice("local", json!({"nodeName": "node-a"})),
        slice("rack-gpu", selector(by_label())),
    ];
    assert!(
        allocate(&slices, &["local", "rack-gpu"], None).is_none(),
        "node-a's labels are unknown"
    );
    let labelled = node("node-a", json!({"rack": "r1"}));
    let result = allocate(&slices, &["local", "rack-gpu"], Some(&labelled)).expect("node-a is in rack r1");
    assert_eq!(result.node_selector, Some(pinned("node-a")));
}

#[test]
fn a_node_the_selector_does_not_match_does_not_reach_the_device() {
    let slices = [
        slice("rack-gpu", selector(by_label())),
        slice("other", selector(by_name())),
    ];
    let outside = node("node-a", json!({"rack": "r2"}));
    assert!(allocate(&slices, &["rack-gpu"], Some(&outside)).is_none());
    let unnamed = node("node-c", json!({"rack": "r2"}));
    assert!(allocate(&slices, &["other"], Some(&unnamed)).is_none());
}

#[test]
fn devices_of_two_label_selectors_are_not_joined_without_a_node() {
    let other = json!({"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r2"]}]});
    let slices = [slice("rack-1", selector(by_label())), slice("rack-2", selector(other))];
    assert!(allocate(&slices, &["rack-1"], None).is_some());
    assert!(
        allocate(&slices, &["rack-1", "rack-2"], None).is_none(),
        "no node is known to reach both"
    );
}

/// A claim any device fits, one request for one device of the class.
fn any_device_claim() -> ResourceClaim {
    from(
        json!({"metadata": {"name": "c", "namespace": "default"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 1}}]}}}),
    )
}

#[test]
fn a_pod_claim_goes_only_to_a_node_the_pod_may_run_on_and_never_by_a_selector() {
    let slices = [
        slice("a", json!({"nodeName": "node-a"})),
        slice("b", json!({"nodeName": "node-b"})),
        slice("rack-gpu", selector(by_label())),
    ];
    let mut engine = Allocator::new(&slices, &[class()], &[]);
    let anywhere = engine.allocate(&any_device_claim(), None).unwrap().expect("fits");
    assert_eq!(
        anywhere.node_selector,
        Some(pinned("node-a")),
        "ties: nodes by name first"
    );

    let only_b = engine
        .allocate_among(&any_device_claim(), &|node| node == "node-b")
        .unwrap()
        .expect("fits on node-b");
    assert_eq!(only_b.node_selector, Some(pinned("node-b")));
    let devices: Vec<_> = only_b
        .devices
        .unwrap()
        .results
        .into_iter()
        .flatten()
        .map(|r| r.device)
        .collect();
    assert_eq!(devices, ["b"]);

    let nowhere = engine.allocate_among(&any_device_claim(), &|_| false).unwrap();
    assert!(
        nowhere.is_none(),
        "the selector's device is not offered to a Pod bound to nodes: {nowhere:?}"
    );
}
