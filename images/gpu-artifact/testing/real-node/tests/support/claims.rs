//! ResourceClaims on the real node, and the devices they were given.

use k8s_openapi::api::resource::v1::{Device, DeviceRequestAllocationResult, ResourceClaim, ResourceSlice};
use kube::{Api, Client};
use serde_json::json;
use testbed::{Progress, wait_until};

use super::{POD_DONE, apply};

/// A ResourceClaim of `count` devices of `class` (and CEL `selector`, if any) in `namespace`.
pub async fn claim(client: &Client, namespace: &str, name: &str, class: &str, count: u32, selector: Option<&str>) {
    let mut exactly = json!({"deviceClassName": class, "allocationMode": "ExactCount", "count": count});
    if let Some(expression) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": expression}}]);
    }
    apply(
        client,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
    )
    .await;
}

/// A ResourceClaim `name` of one share of `class` on a card CEL `selector` picks, asking `capacity`
/// (`gpu.deckhouse.io/<capacity>`, quantity).
pub async fn share_claim(
    client: &Client,
    namespace: &str,
    name: &str,
    class: &str,
    selector: &str,
    capacity: &[(&str, &str)],
) {
    let requests: serde_json::Map<String, serde_json::Value> = capacity
        .iter()
        .map(|(capacity, quantity)| (format!("gpu.deckhouse.io/{capacity}"), json!(quantity)))
        .collect();
    apply(
        client,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class,
            "selectors": [{"cel": {"expression": selector}}],
            "capacity": {"requests": requests}}}]}}}),
    )
    .await;
}

/// MPS allowed on `node`, and a ResourceClaim `name` in `namespace` of `percent` of an H100 through MPS.
pub async fn mps_share_claim(client: &Client, node: &str, namespace: &str, name: &str, percent: u32) {
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"gpu.deckhouse.io/allow-mps": "true"}}}),
    )
    .await;
    apply(client, &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mps",
            "selectors": [{"cel": {"expression": "device.attributes[\"gpu.deckhouse.io\"].device == \"h100-sxm5-80gb\""}}],
            "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": percent.to_string()}}}}]}}})).await;
}

/// The devices of claim `name` once it is allocated, each with its `uuid` attribute from the
/// node's slices (a MIG offer's card's `parentUUID`). Call it while the claim's Pod runs: the claim
/// is deallocated when the Pod is done.
pub async fn allocated_uuids(client: &Client, namespace: &str, name: &str) -> Vec<(String, String)> {
    let results = allocation_results(client, namespace, name).await;
    let slices = resource_slices(client).await;
    results
        .iter()
        .map(|result| {
            let uuid = published_device(&slices, result)
                .and_then(|d| d.attributes)
                .and_then(|a| {
                    // A MIG offer has no UUID before it is made: its card's.
                    let uuid = a
                        .get("gpu.deckhouse.io/uuid")
                        .or_else(|| a.get("gpu.deckhouse.io/parentUUID"));
                    uuid.and_then(|v| v.string.clone())
                })
                .unwrap_or_default();
            (result.device.clone(), uuid)
        })
        .collect()
}

/// Every ResourceSlice now.
pub async fn resource_slices(client: &Client) -> Vec<ResourceSlice> {
    Api::<ResourceSlice>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items
}

/// The device `result` names, as its pool's slices publish it.
pub fn published_device(slices: &[ResourceSlice], result: &DeviceRequestAllocationResult) -> Option<Device> {
    slices
        .iter()
        .filter(|s| s.spec.pool.name == result.pool)
        .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
        .find(|d| d.name == result.device)
}

/// The allocation results of claim `name` once it is allocated (call it while the claim's Pod
/// runs: the claim is deallocated when the Pod is done).
pub async fn allocation_results(client: &Client, namespace: &str, name: &str) -> Vec<DeviceRequestAllocationResult> {
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), namespace);
    wait_until(&format!("ResourceClaim {namespace}/{name} allocated"), POD_DONE, || {
        let claims = claims.clone();
        async move {
            let claim = claims.get(name).await?;
            let results = claim
                .status
                .and_then(|s| s.allocation)
                .and_then(|a| a.devices)
                .and_then(|d| d.results)
                .unwrap_or_default();
            Ok(if results.is_empty() {
                Progress::Pending("not allocated".into())
            } else {
                Progress::Done(results)
            })
        }
    })
    .await
    .unwrap()
}
