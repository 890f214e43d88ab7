//! Shares pack (issue 31, item 7): two 50% shares of one class land on one card whenever both fit,
//! among several free cards, on one node and across nodes (as gpu-dra-controller allocates a
//! gated Pod's claim: `allocate_among` the nodes the Pod may run on). A card already shared is a
//! better fit than a free one, so whole cards stay free for Pods that need them.

use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// A shared offer of one card, as dra-offers publishes it: `sharePercent` 100 divided among the
/// shares, memory consumed only when asked for.
fn shared(card: &str, pci: &str) -> Value {
    let policy = |default: &str, min: &str, max: &str, step: &str| json!({"default": default, "validRange": {"min": min, "max": max, "step": step}});
    json!({"name": format!("{card}-shared"), "allowMultipleAllocations": true,
        "attributes": {"gpu.deckhouse.io/deviceType": {"string": "Shared"},
            "gpu.deckhouse.io/pciAddress": {"string": pci}},
        "capacity": {
            "gpu.deckhouse.io/sharePercent": {"value": "100", "requestPolicy": policy("100", "1", "100", "1")},
            "gpu.deckhouse.io/memory": {"value": "24Gi", "requestPolicy": policy("0", "0", "24Gi", "1Mi")}}})
}

fn node_slice(node: &str, devices: Vec<Value>) -> ResourceSlice {
    from(
        json!({"metadata": {"name": node}, "spec": {"driver": "gpu.deckhouse.io", "nodeName": node,
        "pool": {"name": format!("gpus/{node}"), "generation": 1, "resourceSliceCount": 1}, "devices": devices}}),
    )
}

fn class() -> DeviceClass {
    from(
        json!({"metadata": {"name": "a30-shared"}, "spec": {"selectors": [{"cel": {"expression":
        "device.driver == \"gpu.deckhouse.io\" && device.attributes[\"gpu.deckhouse.io\"].deviceType == \"Shared\""}}]}}),
    )
}

/// A 50% share; `on` keeps it to the card at that PCI address.
fn half(name: &str, on: Option<&str>) -> ResourceClaim {
    let selectors: Vec<Value> = on
        .iter()
        .map(|pci| json!({"cel": {"expression": format!("device.attributes[\"gpu.deckhouse.io\"].pciAddress == \"{pci}\"")}}))
        .collect();
    from(json!({"metadata": {"name": name, "namespace": "team", "uid": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "a30-shared",
            "selectors": selectors, "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": "50"}}}}]}}}))
}

fn card_of(allocation: &AllocationResult) -> (String, String) {
    let result = &allocation.devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    (result.pool.clone(), result.device.clone())
}

/// Allocates two halves one after the other among every node, each stored before the next; the
/// first on the card at `first_on`, the last card a free choice would take, so that only packing
/// brings the second there.
fn two_halves(slices: &[ResourceSlice], first_on: &str) -> [(String, String); 2] {
    let mut allocator = Allocator::new(slices, &[class()], &[]);
    let mut placed = vec![];
    for (name, on) in [("first", Some(first_on)), ("second", None)] {
        let claim = half(name, on);
        let allocation = allocator
            .allocate_among(&claim, &|_| true)
            .unwrap()
            .expect("a half fits");
        allocator.commit_claim(&claim, Some(&allocation));
        placed.push(card_of(&allocation));
    }
    [placed[0].clone(), placed[1].clone()]
}

#[test]
fn two_halves_share_one_card_of_several_on_a_node() {
    let cards = (0..4)
        .map(|i| shared(&format!("gpu{i}"), &format!("0000:0{i}:00.0")))
        .collect();
    let [first, second] = two_halves(&[node_slice("node-a", cards)], "0000:03:00.0");
    assert_eq!(first.1, "gpu3-shared");
    assert_eq!(first, second, "both halves on one card");
}

#[test]
fn two_halves_share_one_card_across_nodes() {
    let slices = [
        node_slice(
            "node-a",
            vec![shared("gpu0", "0000:02:00.0"), shared("gpu1", "0000:03:00.0")],
        ),
        node_slice("node-b", vec![shared("gpu0", "0000:01:00.0")]),
    ];
    let [first, second] = two_halves(&slices, "0000:03:00.0");
    assert_eq!(first, ("gpus/node-a".to_owned(), "gpu1-shared".to_owned()));
    assert_eq!(first, second, "both halves on one card");
}
