//! A selector's answer is remembered per device kind (one offer of one card position, the same on
//! every node of a model) only when the selector reads nothing of the card's common attributes
//! (PCI address, UUID, an admin's own domain). Two nodes with the same card in the same position
//! share every kind; their cards differ only in those common attributes. Whichever node is asked
//! first, the other gets its own answer.

use dra_allocator::Allocator;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// One A30 on `node`, offered whole and as a 1g.6gb partition: the card's common attributes are
/// its UUID (published bare, so in the driver's domain), its PCI address and `extra`.
fn node_slice(node: &str, uuid: &str, extra: Value) -> ResourceSlice {
    let mut common = json!({"uuid": {"string": uuid}, "gpu.deckhouse.io/pciAddress": {"string": "0000:17:00.0"}});
    common
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let device = |name: &str, device_type: &str, memory: &str| {
        let mut attributes = common.clone();
        attributes["gpu.deckhouse.io/deviceType"] = json!({"string": device_type});
        json!({"name": name, "attributes": attributes, "capacity": {"memory": {"value": memory}},
            "consumesCounters": [{"counterSet": "pgpu-0", "counters": {"memory": {"value": memory}}}]})
    };
    from(
        json!({"metadata": {"name": node}, "spec": {"driver": "gpu.deckhouse.io", "nodeName": node,
        "pool": {"name": format!("gpus/{node}"), "generation": 1, "resourceSliceCount": 1},
        "sharedCounters": [{"name": "pgpu-0", "counters": {"memory": {"value": "24Gi"}}}],
        "devices": [device("gpu-0", "Physical", "24Gi"), device("gpu-0-mig-1g6gb-0", "MIG", "6Gi")]}}),
    )
}

fn slices() -> Vec<ResourceSlice> {
    vec![
        node_slice("n1", "GPU-one", json!({})),
        node_slice("n2", "GPU-two", json!({"vendor.example/tier": {"string": "gold"}})),
    ]
}

fn class() -> DeviceClass {
    from(
        json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression":
        "device.driver == \"gpu.deckhouse.io\""}}]}}),
    )
}

fn claim(selector: &str) -> ResourceClaim {
    from(json!({"metadata": {"name": "c", "namespace": "team", "uid": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu",
            "selectors": [{"cel": {"expression": selector}}]}}]}}}))
}

fn node(name: &str) -> Node {
    from(json!({"metadata": {"name": name}}))
}

/// The devices `selector` finds on each node in turn, in `order`, on one allocator.
fn found_in_order(selector: &str, order: [&str; 2]) -> Vec<(String, Option<String>)> {
    let mut allocator = Allocator::new(&slices(), &[class()], &[]);
    let claim = claim(selector);
    order
        .iter()
        .map(|name| {
            let found = allocator.allocate(&claim, Some(&node(name))).unwrap();
            let device = found.map(|a| a.devices.unwrap().results.unwrap()[0].device.clone());
            (name.to_string(), device)
        })
        .collect()
}

fn on_each_node_whatever_the_order(selector: &str, expected: [Option<&str>; 2]) {
    let expected: Vec<(String, Option<String>)> = ["n1", "n2"]
        .iter()
        .zip(expected)
        .map(|(n, d)| (n.to_string(), d.map(str::to_owned)))
        .collect();
    assert_eq!(found_in_order(selector, ["n1", "n2"]), expected, "{selector}");
    let mut reversed = found_in_order(selector, ["n2", "n1"]);
    reversed.reverse();
    assert_eq!(reversed, expected, "{selector}, n2 first");
}

#[test]
fn an_answer_that_reads_only_the_offer_serves_every_node() {
    let mig = Some("gpu-0-mig-1g6gb-0");
    on_each_node_whatever_the_order(
        r#"device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#,
        [mig, mig],
    );
    on_each_node_whatever_the_order(
        r#"device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("10Gi")) >= 0"#,
        [Some("gpu-0"), Some("gpu-0")],
    );
}

#[test]
fn an_answer_that_reads_the_card_is_its_own_on_each_node() {
    // Both offers of the card match; best fit takes the partition.
    let found = Some("gpu-0-mig-1g6gb-0");
    on_each_node_whatever_the_order(
        r#"device.attributes["gpu.deckhouse.io"].uuid == "GPU-two""#,
        [None, found],
    );
    on_each_node_whatever_the_order(
        r#"device.attributes["gpu.deckhouse.io"].pciAddress == "0000:17:00.0" && device.attributes["gpu.deckhouse.io"].uuid == "GPU-one""#,
        [found, None],
    );
    on_each_node_whatever_the_order(
        r#""vendor.example" in device.attributes && device.attributes["vendor.example"].tier == "gold""#,
        [None, found],
    );
}
