//! The benchmarks' fixed workloads (the allocator benchmark, and the controller's memory benchmark
//! in e2e): 8 H100-SXM5-80GB cards per node with every MIG placement
//! offered beside the Physical offer (26 offers a card, as gpu-handler publishes them; no shared
//! offers, no taints), a stream
//! of mixed claims (Physical and MIG of every size, some for two devices) and a stream of MIG
//! claims of mixed sizes for packing. The same seed gives the same workload, in either layout.

use crate::{DRIVER, H100_SXM5_80GB, NodeShape, Rng, classes, node_slices, unpinned};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

/// One inventory, as JSON for Go and as typed objects for ours.
pub struct Inventory {
    pub slices_json: Vec<Value>,
    pub classes_json: Vec<Value>,
    pub nodes_json: Vec<Value>,
    pub slices: Vec<ResourceSlice>,
    pub classes: Vec<DeviceClass>,
    pub nodes: Vec<Node>,
}

/// A claim stream, as JSON for Go and as typed objects for ours.
pub struct ClaimStream {
    pub json: Vec<Value>,
    pub claims: Vec<ResourceClaim>,
}

impl Inventory {
    /// The slices as gpu-handler publishes them: without the pinning attribute, which only the Go
    /// differential reads (see `pinning`) and which, one unique string per device, a memory
    /// benchmark would count as if the module's slices carried it.
    pub fn as_published(mut self) -> Inventory {
        self.slices_json = self.slices_json.into_iter().map(unpinned).collect();
        self.slices = self.slices_json.iter().map(typed).collect();
        self
    }
}

fn typed<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("generated object deserialises")
}

pub fn inventory(seed: u64, nodes: usize, split_layout: bool) -> Inventory {
    inventory_with_mig(seed, nodes, split_layout, true)
}

/// [`inventory`] with every MIG placement offered beside the whole cards, or none (nodes labelled
/// `gpu.deckhouse.io/allow-mig=false`).
pub fn inventory_with_mig(seed: u64, nodes: usize, split_layout: bool, mig: bool) -> Inventory {
    let shape = NodeShape {
        cards_min: 8,
        cards_spread: 1,
        models: &[&H100_SXM5_80GB],
        shared_offer_percent: 0,
        mig_offers_percent: if mig { 100 } else { 0 },
        one_profile_per_size: false,
        taint_percent: 0,
        split_layout,
    };
    let mut rng = Rng::new(seed);
    let names: Vec<String> = (0..nodes).map(|i| format!("node-{i:04}")).collect();
    let slices_json: Vec<Value> = names.iter().flat_map(|n| node_slices(&mut rng, n, &shape)).collect();
    let nodes_json: Vec<Value> = names.iter().map(|n| json!({"metadata": {"name": n}})).collect();
    let classes_json = classes();
    Inventory {
        slices: slices_json.iter().map(typed).collect(),
        classes: classes_json.iter().map(typed).collect(),
        nodes: nodes_json.iter().map(typed).collect(),
        slices_json,
        classes_json,
        nodes_json,
    }
}

fn claim(name: &str, class: &str, count: u64, selector: Option<String>) -> Value {
    // The API server stores the defaulted mode; the allocator relies on it.
    let mut exactly = json!({"deviceClassName": class, "allocationMode": "ExactCount", "count": count});
    if let Some(expression) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": expression}}]);
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}})
}

fn at_least(gi: u64) -> String {
    format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{gi}Gi\")) >= 0")
}

fn stream(json: Vec<Value>) -> ClaimStream {
    ClaimStream {
        claims: json.iter().map(typed).collect(),
        json,
    }
}

/// Mixed claims: 15% Physical, 20% one named MIG profile, the rest MIG with at least some
/// memory (small sizes more often); one in ten asks for two devices.
pub fn mixed_claims(seed: u64, count: usize) -> ClaimStream {
    let mut rng = Rng::new(seed);
    let claims = (0..count)
        .map(|i| {
            let name = format!("mixed-{i:05}");
            let devices = if rng.chance(10) { 2 } else { 1 };
            match rng.below(100) {
                0..15 => claim(&name, "gpu-physical", devices, None),
                15..35 => {
                    let profile = ["1g.10gb", "2g.20gb", "3g.40gb"][rng.below(3) as usize];
                    let selector = format!("device.attributes[\"{DRIVER}\"].migProfile == \"{profile}\"");
                    claim(&name, "gpu-mig", devices, Some(selector))
                }
                _ => {
                    let gi = [5, 5, 10, 10, 10, 20, 20, 40][rng.below(8) as usize];
                    claim(&name, "gpu-mig", devices, Some(at_least(gi)))
                }
            }
        })
        .collect();
    stream(claims)
}

/// Claims of 2 or 4 whole cards (half each), for the topology benchmark.
pub fn whole_card_claims(seed: u64, count: usize) -> ClaimStream {
    let mut rng = Rng::new(seed);
    let claims = (0..count)
        .map(|i| {
            let cards = if rng.chance(50) { 2 } else { 4 };
            claim(&format!("cards-{i:05}"), "gpu-physical", cards, None)
        })
        .collect();
    stream(claims)
}

/// MIG claims of one device with at least 5, 10, 20 or 40 Gi, smaller ones more often.
pub fn mig_claims(seed: u64, count: usize) -> ClaimStream {
    let mut rng = Rng::new(seed);
    let claims = (0..count)
        .map(|i| {
            let gi = [5, 5, 5, 5, 10, 10, 10, 20, 20, 40][rng.below(10) as usize];
            claim(&format!("mig-{i:05}"), "gpu-mig", 1, Some(at_least(gi)))
        })
        .collect();
    stream(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PIN_ATTRIBUTE;

    fn attribute_names(inventory: &Inventory) -> Vec<Vec<String>> {
        let devices = inventory.slices.iter().flat_map(|s| s.spec.devices.iter().flatten());
        devices
            .map(|d| d.attributes.iter().flatten().map(|(name, _)| name.clone()).collect())
            .collect()
    }

    #[test]
    fn published_slices_lose_only_the_pinning_attribute() {
        let pinnable = attribute_names(&inventory(1, 2, false));
        let published = attribute_names(&inventory(1, 2, false).as_published());
        assert_eq!(published.len(), pinnable.len());
        assert!(pinnable.iter().all(|names| names.iter().any(|n| n == PIN_ATTRIBUTE)));
        let without: Vec<Vec<String>> = pinnable
            .into_iter()
            .map(|names| names.into_iter().filter(|n| n != PIN_ATTRIBUTE).collect())
            .collect();
        assert_eq!(published, without);
    }
}
