//! How Go judges an allocation of ours: the claim with each request pinned (by the
//! `harness.test/id` attribute) to exactly the devices ours chose, and the chosen subrequest for
//! `firstAvailable`; Go must accept it on our node with the same devices and consumed capacity.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::AllocationResult;
use serde_json::{Value, json};

/// (request, pool, device, consumed capacity as exact decimals), sorted.
pub type DeviceSet = Vec<(String, String, String, Option<BTreeMap<String, String>>)>;

/// `slice` (as JSON) as gpu-handler would publish it: without the pinning attribute, which only
/// Go's judgement reads. One unique string per device, it would also make every device a kind of
/// its own in our engine, which production slices do not (see dra-allocator's `selector_parts`).
pub fn unpinned(mut slice: Value) -> Value {
    for device in slice["spec"]["devices"].as_array_mut().into_iter().flatten() {
        if let Some(attributes) = device["attributes"].as_object_mut() {
            attributes.remove(crate::PIN_ATTRIBUTE);
        }
    }
    slice
}

/// The claim (as JSON) with each request pinned to the devices of `result`.
pub fn pinned_claim(claim: &Value, result: &AllocationResult) -> Value {
    let mut by_request: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in result
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
    {
        by_request
            .entry(r.request.clone())
            .or_default()
            .push(format!("{}/{}", r.pool, r.device));
    }
    let mut pinned = claim.clone();
    for request in pinned["spec"]["devices"]["requests"].as_array_mut().expect("requests") {
        let name = request["name"].as_str().expect("name").to_owned();
        let (key, ids) = by_request
            .iter()
            .find(|(k, _)| *k == &name || k.starts_with(&format!("{name}/")))
            .expect("every request has results");
        let pin = json!({"cel": {"expression": format!("device.attributes[\"harness.test\"].id in {}", serde_json::to_string(ids).unwrap())}});
        let target = if let Some((_, sub)) = key.split_once('/') {
            let chosen = request["firstAvailable"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["name"] == sub)
                .unwrap()
                .clone();
            request["firstAvailable"] = json!([chosen]);
            &mut request["firstAvailable"][0]
        } else {
            &mut request["exactly"]
        };
        let mut selectors = target["selectors"].as_array().cloned().unwrap_or_default();
        selectors.push(pin);
        target["selectors"] = json!(selectors);
    }
    pinned
}

/// What an allocation took, comparable across engines.
pub fn device_set(result: &AllocationResult) -> DeviceSet {
    let mut set: Vec<_> = result
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .into_iter()
        .flatten()
        .map(|r| {
            let consumed = r.consumed_capacity.as_ref().map(|c| {
                c.iter()
                    .map(|(k, v)| (k.clone(), dra_cel::Quantity::parse(&v.0).unwrap().to_decimal_string()))
                    .collect()
            });
            (r.request.clone(), r.pool.clone(), r.device.clone(), consumed)
        })
        .collect();
    set.sort();
    set
}

/// The node a node-local allocation is pinned to (its `metadata.name` node selector).
pub fn node_of(result: &AllocationResult) -> Option<String> {
    result
        .node_selector
        .as_ref()
        .and_then(|s| s.node_selector_terms.first())
        .and_then(|t| t.match_fields.as_ref())
        .and_then(|f| f.first())
        .and_then(|f| f.values.as_ref())
        .and_then(|v| v.first())
        .cloned()
}
