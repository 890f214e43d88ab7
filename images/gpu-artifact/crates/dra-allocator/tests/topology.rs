//! Topology-aware best fit on nodes of eight H100 SXM5 as the module publishes them (every MIG
//! placement beside the whole card; one NVLink domain; cards 0-3 on NUMA node 0 under root
//! `pci0000:00`, cards 4-7 on NUMA node 1 under `pci0000:80`): a request of several whole cards
//! goes to one NUMA node, the tightest that holds it, on the node in use where it fits closest; a
//! node nobody uses is opened only when no node in use holds it, even spread; a `matchAttribute`
//! constraint still holds.

use std::collections::BTreeSet;

use allocator_workloads::{H100_SXM5_80GB, NodeShape, Rng, classes, node_slices};
use dra_allocator::Allocator;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn engine(nodes: &[&str]) -> Allocator {
    let shape = NodeShape {
        cards_min: 8,
        cards_spread: 1,
        models: &[&H100_SXM5_80GB],
        shared_offer_percent: 0,
        mig_offers_percent: 100,
        one_profile_per_size: false,
        taint_percent: 0,
        split_layout: false,
    };
    let mut rng = Rng::new(1);
    let slices: Vec<ResourceSlice> = nodes
        .iter()
        .flat_map(|node| node_slices(&mut rng, node, &shape))
        .map(from)
        .collect();
    let classes: Vec<DeviceClass> = classes().into_iter().map(from).collect();
    Allocator::new(&slices, &classes, &[])
}

/// A claim for `count` whole cards, with `extra` merged into its `devices`.
fn claim(name: &str, count: u32, extra: Value) -> ResourceClaim {
    let mut devices = json!({"requests": [{"name": "gpu",
        "exactly": {"deviceClassName": "gpu-physical", "allocationMode": "ExactCount", "count": count}}]});
    for (k, v) in extra.as_object().unwrap() {
        devices[k] = v.clone();
    }
    from(json!({"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": {"devices": devices}}))
}

/// A claim for the one whole card `card` (its PCI address as the workload numbers them).
fn pinned(name: &str, card: u32) -> ResourceClaim {
    let pci = format!("0000:{:02x}:00.0", 0x10 + card * 0x10);
    let selector = format!("device.attributes[\"gpu.deckhouse.io\"].pciAddress == \"{pci}\"");
    let mut claim = claim(name, 1, json!({}));
    claim.spec.devices.as_mut().unwrap().requests.as_mut().unwrap()[0]
        .exactly
        .as_mut()
        .unwrap()
        .selectors = Some(vec![from(json!({"cel": {"expression": selector}}))]);
    claim
}

fn node(name: &str) -> Node {
    from(json!({"metadata": {"name": name}}))
}

/// Allocates and commits; returns the node and the cards (`gpu<i>` indices) it got.
fn place(engine: &mut Allocator, claim: &ResourceClaim, on: Option<&str>) -> (String, BTreeSet<u32>) {
    let on = on.map(node);
    let result: AllocationResult = engine
        .allocate(claim, on.as_ref())
        .unwrap()
        .unwrap_or_else(|| panic!("{:?} fits", claim.metadata.name));
    engine.commit_claim(claim, Some(&result));
    let results = result.devices.as_ref().unwrap().results.as_ref().unwrap();
    let cards = results
        .iter()
        .map(|r| r.device.strip_prefix("gpu").unwrap().parse().unwrap())
        .collect();
    let node = allocator_workloads::node_of(&result).unwrap_or_default();
    (node, cards)
}

#[test]
fn several_cards_go_to_the_tightest_numa_node_that_holds_them() {
    let mut engine = engine(&["node-a"]);
    // Card 0 is taken: NUMA node 0 has three free cards, NUMA node 1 four.
    place(&mut engine, &pinned("one", 0), Some("node-a"));
    let (_, two) = place(&mut engine, &claim("two", 2, json!({})), Some("node-a"));
    assert_eq!(two, BTreeSet::from([1, 2]), "NUMA node 0, so NUMA node 1 stays whole");
    let (_, four) = place(&mut engine, &claim("four", 4, json!({})), Some("node-a"));
    assert_eq!(
        four,
        BTreeSet::from([4, 5, 6, 7]),
        "the first fit (3, 4, 5, 6) spans both NUMA nodes"
    );
}

#[test]
fn the_closest_node_in_use_wins_and_no_node_is_opened_for_topology() {
    let mut engine = engine(&["node-a", "node-b", "node-c"]);
    // node-a keeps cards 3 and 4 free: two cards, one on each NUMA node. node-b holds one card,
    // on NUMA node 1; node-c is empty.
    for card in [0, 1, 2, 5, 6, 7] {
        place(&mut engine, &pinned(&format!("a{card}"), card), Some("node-a"));
    }
    place(&mut engine, &pinned("b7", 7), Some("node-b"));
    let (node, cards) = place(&mut engine, &claim("pair", 2, json!({})), None);
    assert_eq!(
        (node.as_str(), cards),
        ("node-b", BTreeSet::from([4, 5])),
        "node-a comes first by name, but node-b, in use too, holds the pair on one NUMA node (the tighter one)"
    );
    // node-b's other cards go too; the next pair still goes to node-a, spread, before the empty
    // node-c is opened.
    let (node, _) = place(&mut engine, &claim("five", 5, json!({})), Some("node-b"));
    assert_eq!(node, "node-b");
    let (node, cards) = place(&mut engine, &claim("split", 2, json!({})), None);
    assert_eq!(
        (node.as_str(), cards),
        ("node-a", BTreeSet::from([3, 4])),
        "packing first: spread on a node in use rather than a node nobody uses"
    );
    let (node, cards) = place(&mut engine, &claim("next", 2, json!({})), None);
    assert_eq!((node.as_str(), cards), ("node-c", BTreeSet::from([0, 1])));
}

#[test]
fn a_match_attribute_constraint_on_the_numa_node_still_holds() {
    let mut engine = engine(&["node-a"]);
    for card in [0, 1, 2, 4, 5] {
        place(&mut engine, &pinned(&format!("a{card}"), card), Some("node-a"));
    }
    // Free: card 3 (NUMA 0), cards 6 and 7 (NUMA 1).
    let constrained = claim(
        "together",
        2,
        json!({"constraints": [{"matchAttribute": "resource.kubernetes.io/numaNode"}]}),
    );
    let (_, cards) = place(&mut engine, &constrained, Some("node-a"));
    assert_eq!(cards, BTreeSet::from([6, 7]));
    let three = claim(
        "three",
        2,
        json!({"constraints": [{"matchAttribute": "resource.kubernetes.io/numaNode"}]}),
    );
    assert_eq!(
        engine.allocate(&three, Some(&node("node-a"))).unwrap(),
        None,
        "card 3 is alone on its NUMA node"
    );
}
