//! Other scheduling gates are respected (issue 31, item 2), with the real scheduler and the real
//! components under their RBAC. While another gate (a queue's, here `example.com/quota`) holds a
//! Pod beside ours, gpu-dra-controller allocates nothing to it: a Pod created after it, with our
//! gate alone, gets a card first and the held Pod's claim stays unallocated; once the other gate
//! goes, the Pod is allocated best fit and bound. gpu-controller's lifter counts a Pod's wait from
//! when our gate became its last one: with gpu-dra-controller stopped, a Pod gated by us alone
//! has its gate lifted while an older Pod that another gate still holds keeps both.

mod support;

use std::collections::BTreeMap;

use claim_allocation::selection::SCHEDULING_GATE;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::{AgentWorkspace, install_crds, start_controller};
use support::dra_controller_run::{claim_when, lifted_note, start_dra_controller};
use support::*;
use testbed::{ReadyNode, TestNamespace};

const QUOTA_GATE: &str = "example.com/quota";

fn claim(name: &str, class: &str) -> ResourceClaim {
    serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}))
    .unwrap()
}

/// A Pod on `node` that uses the claim `claim`, held by `gates`, labelled as the webhook labels
/// the Pods it gates.
fn held_pod(name: &str, node: &str, claim: &str, gates: &[&str]) -> Pod {
    let gates: Vec<_> = gates.iter().map(|g| json!({"name": g})).collect();
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}], "schedulingGates": gates});
    let mut pod = pod(name, node, json!({"claims": [{"name": "gpu"}]}), uses);
    pod.labels_mut()
        .insert("gpu.deckhouse.io/allocation-gate".into(), "true".into());
    pod
}

fn gates_of(pod: &Pod) -> Vec<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.clone());
    gates.unwrap_or_default().into_iter().map(|g| g.name).collect()
}

/// Removes `gate` from the Pod, keeping its others, as the queue does when it admits the Pod.
async fn admit(ns: &TestNamespace, pod: &str, keep: &[&str]) {
    let gates: Vec<_> = keep.iter().map(|g| json!({"name": g})).collect();
    let patch = json!({"spec": {"schedulingGates": gates}});
    ns.api::<Pod>()
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_another_gate_holds_is_neither_allocated_nor_lifted() {
    let ns = TestNamespace::create("dra-other-gates").await.unwrap();
    let client = ns.client();
    install_crds(&client).await;
    let node = ReadyNode::register(&ns, "two-cards", BTreeMap::new()).await.unwrap();
    let cards = json!({"devices": [device("gpu0", "Physical", None), device("gpu1", "Physical", None)]});
    create(
        &Api::<ResourceSlice>::all(client.clone()),
        &slice(&ns, "cards", node.name(), 1, cards),
    )
    .await;
    let physical = create(
        &Api::<DeviceClass>::all(client.clone()),
        &device_type_class(&ns, "physical", "Physical"),
    )
    .await
    .name_any();
    let claims = ns.api::<ResourceClaim>();
    let pods = ns.api::<Pod>();
    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;

    // 1. `queued` (another gate beside ours) comes first, `ready` (ours alone) after it: only `ready`
    //    is allocated and bound.
    for name in ["queued-claim", "ready-claim"] {
        create(&claims, &claim(name, &physical)).await;
    }
    create(
        &pods,
        &held_pod("queued", node.name(), "queued-claim", &[QUOTA_GATE, SCHEDULING_GATE]),
    )
    .await;
    create(
        &pods,
        &held_pod("ready", node.name(), "ready-claim", &[SCHEDULING_GATE]),
    )
    .await;
    bound_pod(&ns, "ready").await;
    assert_eq!(
        allocated_devices(&claims.get("queued-claim").await.unwrap()),
        vec![],
        "a Pod held by another gate gets no device"
    );
    assert_eq!(
        gates_of(&pods.get("queued").await.unwrap()),
        [QUOTA_GATE, SCHEDULING_GATE]
    );

    // 2. The queue admits `queued`: now our gate is its last, and it is allocated and bound.
    admit(&ns, "queued", &[SCHEDULING_GATE]).await;
    claim_when(&claims, "queued-claim", "allocated", |c| {
        allocated_devices(c).len() == 1
    })
    .await;
    bound_pod(&ns, "queued").await;
    drop(controller);

    // 3. No gpu-dra-controller: gpu-controller's lifter lifts the gate of `alone` (ours alone) while
    //    `held`, older and held by another gate, keeps both; its wait starts once admitted.
    for name in ["held-claim", "alone-claim"] {
        create(&claims, &claim(name, &physical)).await;
    }
    let (lifter, _) = start_controller(&ns, ws.dir.path(), "Debug", true).await;
    create(
        &pods,
        &held_pod("held", node.name(), "held-claim", &[QUOTA_GATE, SCHEDULING_GATE]),
    )
    .await;
    create(
        &pods,
        &held_pod("alone", node.name(), "alone-claim", &[SCHEDULING_GATE]),
    )
    .await;
    let note = lifted_note(&ns, "alone").await;
    assert!(note.contains("within 30s"), "{note}\n{}", lifter.log());
    assert_eq!(
        gates_of(&pods.get("held").await.unwrap()),
        [QUOTA_GATE, SCHEDULING_GATE],
        "the queue still holds it: it is not waiting for gpu-dra-controller"
    );
    admit(&ns, "held", &[SCHEDULING_GATE]).await;
    let note = lifted_note(&ns, "held").await;
    assert!(note.contains("as the Pod's last gate"), "{note}");
    assert!(gates_of(&pods.get("held").await.unwrap()).is_empty());
}
