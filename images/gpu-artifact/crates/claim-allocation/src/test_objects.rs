//! Objects the unit tests of this crate build engines and rounds from: A30 nodes as the module
//! publishes them (every MIG offer, the 1.34 layout), the module's classes, claims of one class.

use allocator_workloads::{A30, NodeShape, Rng, classes, node_slices};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::json;

/// The slices of `node` with `cards` A30s.
pub fn slices(node: &str, cards: usize) -> Vec<ResourceSlice> {
    slices_with_mig(node, cards, true)
}

/// The slices of `node` with `cards` A30s, with every MIG offer or none (`allow-mig=false`).
pub fn slices_with_mig(node: &str, cards: usize, mig: bool) -> Vec<ResourceSlice> {
    let shape = NodeShape {
        cards_min: cards,
        cards_spread: 1,
        models: &[&A30],
        shared_offer_percent: 0,
        mig_offers_percent: if mig { 100 } else { 0 },
        one_profile_per_size: false,
        taint_percent: 0,
        split_layout: false,
    };
    let mut rng = Rng::new(7);
    node_slices(&mut rng, node, &shape)
        .into_iter()
        .map(|s| serde_json::from_value(s).expect("slice"))
        .collect()
}

/// `gpu-mig`, `gpu-physical`, `gpu-shared` and `gpu-any`.
pub fn device_classes() -> Vec<DeviceClass> {
    classes()
        .into_iter()
        .map(|c| serde_json::from_value(c).expect("class"))
        .collect()
}

/// Claim `name` (uid `name`, resourceVersion `version`) for `count` devices of `class`.
pub fn claim(name: &str, class: &str, count: u32, version: u64) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": version.to_string()},
        "spec": {"devices": {"requests": [{"name": "gpu",
            "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": count}}]}}
    }))
    .expect("claim")
}

/// A class of our driver with `expression` after the driver check.
pub fn class(name: &str, expression: &str) -> DeviceClass {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {
        "expression": format!("device.driver == \"gpu.deckhouse.io\" && {expression}")}}]}}))
    .expect("class")
}
