//! Random inventories for the differential test: 1-4 nodes (sometimes up to 50) of GPU cards, and
//! at low rates a GPU pool reached through a node selector (by node name or by a node label) and
//! an invalid pool (a device name repeated across two slices: a foreign driver's, or a copy of
//! one of our node's slices). The API server accepts both; only the allocators can refuse them.

use allocator_workloads::{DRIVER, Rng, node_slices};
use serde_json::{Value, json};

use crate::case::Unit;
use crate::generator::node_shape;

/// Percent of cases with a node-selector GPU pool.
const SELECTOR_POOL_PERCENT: u64 = 12;
/// Percent of cases with an invalid pool.
const INVALID_POOL_PERCENT: u64 = 8;
const RACK_LABEL: &str = "harness.test/rack";

pub fn units(rng: &mut Rng, split_layout: bool, taints: bool) -> Vec<Unit> {
    let nodes = if rng.chance(10) {
        1 + rng.below(50)
    } else {
        1 + rng.below(4)
    };
    let shape = node_shape(split_layout, taints);
    let mut units: Vec<Unit> = (0..nodes)
        .map(|i| {
            let name = format!("node-{i:02}");
            Unit {
                slices: node_slices(rng, &name, &shape),
                node: Some(json!({"metadata": {"name": name}})),
            }
        })
        .collect();
    if rng.chance(SELECTOR_POOL_PERCENT) {
        let rack = selector_pool(rng, &mut units, split_layout, taints);
        units.push(rack);
    }
    if rng.chance(INVALID_POOL_PERCENT) {
        let at = rng.below(nodes) as usize;
        invalidate(rng, &mut units[at]);
    }
    units
}

/// A pool of GPU cards on a rack, reached from one node by its name (`matchFields`, which takes
/// exactly one value) or from a random non-empty set of nodes by a label they get
/// (`matchExpressions`).
fn selector_pool(rng: &mut Rng, units: &mut [Unit], split_layout: bool, taints: bool) -> Unit {
    let term = if rng.chance(50) {
        let node = &units[rng.below(units.len() as u64) as usize];
        let name = node.node.as_ref().expect("a node")["metadata"]["name"].clone();
        json!({"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]})
    } else {
        let mut chosen: Vec<usize> = (0..units.len()).filter(|_| rng.chance(50)).collect();
        if chosen.is_empty() {
            chosen.push(rng.below(units.len() as u64) as usize);
        }
        for &i in &chosen {
            units[i].node.as_mut().expect("a node")["metadata"]["labels"] = json!({RACK_LABEL: "r0"});
        }
        json!({"matchExpressions": [{"key": RACK_LABEL, "operator": "In", "values": ["r0"]}]})
    };
    let mut slices = node_slices(rng, "rack-0", &node_shape(split_layout, taints));
    for slice in &mut slices {
        let spec = slice["spec"].as_object_mut().expect("spec");
        spec.remove("nodeName");
        spec.insert("nodeSelector".to_owned(), json!({"nodeSelectorTerms": [term]}));
    }
    Unit { node: None, slices }
}

/// Adds an invalid pool to the node: a foreign NIC pool with `eth0` in both of its slices, or a
/// copy (under a new name, in the same pool) of one of the node's GPU slices with devices.
fn invalidate(rng: &mut Rng, unit: &mut Unit) {
    let node = unit.node.as_ref().expect("a node")["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    if rng.chance(50) {
        for part in ["a", "b"] {
            unit.slices
                .push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": format!("{node}-nic-{part}")},
                "spec": {"driver": "nic.example.com", "nodeName": node,
                    "pool": {"name": format!("nics/{node}"), "generation": 1, "resourceSliceCount": 2},
                    "devices": [{"name": "eth0", "attributes": {"nic.example.com/slot": {"string": part}}}]}}));
        }
        return;
    }
    let with_devices: Vec<usize> = (0..unit.slices.len())
        .filter(|&i| unit.slices[i]["spec"]["devices"].is_array())
        .collect();
    let original = with_devices[rng.below(with_devices.len() as u64) as usize];
    let mut copy = unit.slices[original].clone();
    copy["metadata"]["name"] = json!(format!("{}-copy", copy["metadata"]["name"].as_str().expect("name")));
    unit.slices.push(copy);
    let ours = |s: &Value| s["spec"]["driver"] == DRIVER;
    let count = unit.slices.iter().filter(|s| ours(s)).count();
    for slice in unit.slices.iter_mut().filter(|s| ours(s)) {
        slice["spec"]["pool"]["resourceSliceCount"] = json!(count);
    }
}
