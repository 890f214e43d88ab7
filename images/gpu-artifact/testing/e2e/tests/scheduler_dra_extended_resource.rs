//! The real scheduler turns an extended-resource request into a DRA claim, allocates it against a
//! slice we publish, selecting with Kubernetes CEL, and binds the Pod.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::Api;
use serde_json::json;
use support::*;
use testbed::{ReadyNode, TestNamespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_creates_and_allocates_the_extended_resource_claim() {
    let ns = TestNamespace::create("extended-resource").await.unwrap();
    let node = ReadyNode::register(&ns, "gpu", BTreeMap::new()).await.unwrap();
    let client = ns.client();

    // A Physical offer and a MIG offer: only the CEL selector tells them apart.
    let devices = json!({"devices": [device("gpu0-mig-1g6gb-0", "MIG", None), device("gpu0", "Physical", None)]});
    create(
        &Api::<ResourceSlice>::all(client.clone()),
        &slice(&ns, "gpus", node.name(), 1, devices),
    )
    .await;
    let resource = format!("gpu.deckhouse.io/{}", ns.name());
    let class = device_class(
        &ns,
        "physical",
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "Physical""#,
        Some(&resource),
    );
    create(&Api::<DeviceClass>::all(client.clone()), &class).await;

    let limits = json!({"limits": {resource.clone(): "1"}});
    create(&ns.api::<Pod>(), &pod("trainer", node.name(), limits, json!({}))).await;

    let bound = bound_pod(&ns, "trainer").await;
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some(node.name()));

    let claims = claims(&ns).await;
    assert_eq!(claims.len(), 1, "exactly one special claim: {claims:?}");
    let claim = &claims[0];
    let annotations = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("resource.kubernetes.io/extended-resource-claim")
            .map(String::as_str),
        Some("true"),
        "the scheduler marks the claim it made: {annotations:?}"
    );
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Pod", "trainer"));
    assert_eq!(
        allocated_devices(claim),
        vec![(format!("gpus/{}", node.name()), "gpu0".to_owned())],
        "allocated to the Physical device, not the MIG offer"
    );

    let pod = ns.api::<Pod>().get("trainer").await.unwrap();
    let status = pod
        .status
        .unwrap()
        .extended_resource_claim_status
        .expect("pod status names the claim");
    assert_eq!(Some(status.resource_claim_name), claim.metadata.name.clone());
    assert_eq!(status.request_mappings[0].resource_name, resource);
}
