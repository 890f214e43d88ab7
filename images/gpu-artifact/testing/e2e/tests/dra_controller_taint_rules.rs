//! An admin's DeviceTaintRule (issue 31, deliverable 4) through the real gpu-dra-controller process
//! under its RBAC, in the version the API server serves (`resource.k8s.io/v1alpha3` on 1.34, `v1`
//! on 1.37): a NoSchedule rule on one card keeps a gated Pod off that card, so it lands on the
//! other; when the only free card is tainted, the waiting claim's CannotAllocate Event names the
//! rule; once the rule is deleted, the claim is allocated on that card.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::{AgentWorkspace, install_crds};
use support::dra_controller_run::*;
use support::*;
use testbed::{ReadyNode, TestNamespace};

/// A Pending reason is explained at most every 30 s per claim (see `dra_controller_pending`).
const WITHIN_TWO_EXPLANATIONS: Duration = Duration::from_secs(75);

/// Creates a claim of `class` and a Pod with our gate, on no node, that waits for it.
async fn waited_for(ns: &TestNamespace, name: &str, class: &str) {
    let claim: ResourceClaim = serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}))
    .unwrap();
    gated_pod_waiting_for(ns, claim).await;
}

/// The DeviceTaintRule API of the served version: v1 where it exists (1.37), else v1alpha3.
async fn taint_rules(ns: &TestNamespace) -> (Api<DynamicObject>, &'static str) {
    let version = if ns.cluster().server_minor().await.expect("server version") <= 34 {
        "v1alpha3"
    } else {
        "v1"
    };
    let gvk = GroupVersionKind::gvk("resource.k8s.io", version, "DeviceTaintRule");
    (Api::all_with(ns.client(), &ApiResource::from_gvk(&gvk)), version)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_noschedule_rule_keeps_gated_pods_off_the_card_and_is_named() {
    let ns = TestNamespace::create("dra-taint-rules").await.unwrap();
    let client = ns.client();
    install_crds(&client).await;
    let drained = ReadyNode::register(&ns, "drained", BTreeMap::new()).await.unwrap();
    let open = ReadyNode::register(&ns, "open", BTreeMap::new()).await.unwrap();
    let slices = Api::<ResourceSlice>::all(client.clone());
    for node in [drained.name(), open.name()] {
        let card = json!({"devices": [device("gpu0", "Physical", None)]});
        create(&slices, &slice(&ns, node, node, 1, card)).await;
    }
    let classes = Api::<DeviceClass>::all(client.clone());
    let physical = create(&classes, &device_type_class(&ns, "physical", "Physical"))
        .await
        .name_any();
    let (rules, version) = taint_rules(&ns).await;
    let rule_name = ns.unique("maintenance");
    let drained_pool = format!("gpus/{}", drained.name());
    let rule: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("resource.k8s.io/{version}"),
        "kind": "DeviceTaintRule",
        "metadata": {"name": rule_name, "labels": ns.owner_labels()},
        "spec": {"deviceSelector": {"driver": DRIVER, "pool": drained_pool, "device": "gpu0"},
                 "taint": {"key": "example.com/maintenance", "value": "planned", "effect": "NoSchedule"}}}))
    .unwrap();
    create(&rules, &rule).await;

    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;
    let claims = ns.api::<ResourceClaim>();
    // The tainted card is first in name order ("drained" < "open"), yet the claim goes to the other.
    waited_for(&ns, "first", &physical).await;
    let open_pool = format!("gpus/{}", open.name());
    let on_open = |c: &ResourceClaim| allocated_devices(c) == vec![(open_pool.clone(), "gpu0".to_owned())];
    claim_when(&claims, "first", "allocated on the untainted card", on_open).await;
    let bound = bound_pod(&ns, "first-user").await;
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some(open.name()));

    // The only free card is tainted: the claim's reason names the rule on that node.
    waited_for(&ns, "second", &physical).await;
    let named = format!("not tolerated: DeviceTaintRule {rule_name}");
    let node_part = format!("node {}: ", drained.name());
    let event = event_whose_note(&ns, "second", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        note.split("; ")
            .any(|part| part.contains(&node_part) && part.contains(&named))
    })
    .await;
    // The Pod that waits says so too, in its own CannotAllocate Event.
    event_whose_note(&ns, "second-user", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        note.contains(&node_part) && note.contains(&named)
    })
    .await;
    let stored = claims.get("second").await.unwrap();
    assert!(
        allocated_devices(&stored).is_empty(),
        "{:?}: {:?}",
        event.note,
        stored.status
    );

    // The admin ends the maintenance: the waiting claim gets the card.
    rules.delete(&rule_name, &DeleteParams::default()).await.unwrap();
    let on_drained = |c: &ResourceClaim| allocated_devices(c) == vec![(drained_pool.clone(), "gpu0".to_owned())];
    claim_when(
        &claims,
        "second",
        "allocated on the card once the rule is gone",
        on_drained,
    )
    .await;
    drop(controller);
}
