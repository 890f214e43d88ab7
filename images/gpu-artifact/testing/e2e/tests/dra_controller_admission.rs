//! The allocation gate at admission (issue 16 item 3), on the real control plane: gpu-dra-controller
//! runs as a real process under its RBAC and serves its mutating webhook over TLS on loopback, the
//! real API server calls it. A Pod with an ordinary template claim of our class gets the gate
//! `gpu.deckhouse.io/allocation`, is allocated best fit by the controller and bound by the real
//! scheduler; a Pod of a class that opts out (`gpu.deckhouse.io/best-fit: "false"`) gets no gate;
//! with the controller stopped the webhook fails open and a Pod of our class still schedules, and
//! gpu-controller lifts the gate of a gated Pod that no one allocates within 30 s (with an Event).

mod support;

use std::collections::BTreeMap;

use gpu_api::labels::ALLOCATION_GATE_LABEL;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use support::allocation_webhook::start_gating_controller;
use support::components::*;
use support::dra_controller_run::lifted_note;
use support::*;
use testbed::{ReadyNode, TestNamespace};

const GATE: &str = "gpu.deckhouse.io/allocation";

fn gates(pod: &Pod) -> Vec<String> {
    let gates = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.clone())
        .unwrap_or_default();
    gates.into_iter().map(|g| g.name).collect()
}

/// Whether the Pod carries the label the gate lifter lists gated Pods by.
fn listed_as_gated(pod: &Pod) -> bool {
    pod.labels().contains_key(ALLOCATION_GATE_LABEL)
}

async fn template_pod(ns: &TestNamespace, name: &str, node: &str, class: &str) -> Pod {
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}}))
    .unwrap();
    create(&ns.api::<ResourceClaimTemplate>(), &template).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}]});
    create(
        &ns.api::<Pod>(),
        &pod(name, node, json!({"claims": [{"name": "gpu"}]}), uses),
    )
    .await
}

/// The devices of the claim made for the bound Pod, and who wrote its allocation.
async fn claim_of(ns: &TestNamespace, bound: &Pod) -> (Vec<(String, String)>, Vec<String>) {
    let statuses = bound.status.clone().unwrap().resource_claim_statuses.unwrap();
    let name = statuses[0].resource_claim_name.clone().unwrap();
    let claim = ns.api::<ResourceClaim>().get(&name).await.unwrap();
    let writers = claim
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    (allocated_devices(&claim), writers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_pods_get_the_gate_at_admission_and_schedule_without_the_controller() {
    let ns = TestNamespace::create("dra-admission").await.unwrap();
    let node = ReadyNode::register(&ns, "a30", BTreeMap::new()).await.unwrap();
    let client = ns.client();
    // The big partitions come first in the slice: the scheduler's first fit takes 4g.24gb, best
    // fit takes a 1g.6gb.
    let set = "pgpu-0000-01-00-0";
    let counters = json!([{"name": set, "counters": {"memory": {"value": "24Gi"}}}]);
    let devices = json!([
        device("gpu0-mig-4g24gb-0", "MIG", Some((set, "24Gi"))),
        device("gpu0-mig-1g6gb-0", "MIG", Some((set, "6Gi"))),
        device("gpu0-mig-1g6gb-1", "MIG", Some((set, "6Gi"))),
    ]);
    publish_card(&ns, node.name(), counters, devices).await;
    let classes = Api::<DeviceClass>::all(client.clone());
    let cel = r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#;
    let best_fit = create(&classes, &device_class(&ns, "mig", cel, None)).await.name_any();
    let mut opted_out = device_class(&ns, "mig-first-fit", cel, None);
    opted_out
        .annotations_mut()
        .insert("gpu.deckhouse.io/best-fit".into(), "false".into());
    let first_fit = create(&classes, &opted_out).await.name_any();

    let ws = AgentWorkspace::new();
    let (controller, config) = start_gating_controller(&ns, &ws).await;
    let webhooks = Api::<MutatingWebhookConfiguration>::all(client.clone());

    // 1. Our class: gated at admission, allocated best fit by the controller, bound by the scheduler.
    let created = template_pod(&ns, "best-fit", node.name(), &best_fit).await;
    assert_eq!(gates(&created), [GATE], "the webhook added the gate");
    assert!(listed_as_gated(&created), "the webhook labelled the Pod it gated");
    let bound = bound_pod(&ns, "best-fit").await;
    assert!(gates(&bound).is_empty(), "the controller lifted the gate");
    assert!(
        !listed_as_gated(&bound),
        "the controller took the label off with the gate: {:?}",
        bound.labels()
    );
    let (devices, writers) = claim_of(&ns, &bound).await;
    let pool = format!("gpus/{}", node.name());
    assert_eq!(devices, [(pool.clone(), "gpu0-mig-1g6gb-0".to_owned())], "best fit");
    assert!(writers.contains(&"gpu-dra-controller".to_owned()), "{writers:?}");

    // 2. A class that opts out: no gate, the scheduler alone allocates.
    let created = template_pod(&ns, "first-fit", node.name(), &first_fit).await;
    assert!(
        gates(&created).is_empty(),
        "no gate for an opted-out class: {:?}",
        gates(&created)
    );
    let bound = bound_pod(&ns, "first-fit").await;
    let (devices, writers) = claim_of(&ns, &bound).await;
    assert_eq!(devices, [(pool.clone(), "gpu0-mig-1g6gb-1".to_owned())]);
    assert!(!writers.contains(&"gpu-dra-controller".to_owned()), "{writers:?}");

    // 3. Fail open: with gpu-dra-controller stopped the webhook does not answer, and a Pod of our
    // class is admitted without the gate and scheduled.
    drop(controller);
    ns.api::<Pod>()
        .delete("first-fit", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let created = template_pod(&ns, "no-controller", node.name(), &best_fit).await;
    assert!(gates(&created).is_empty(), "fail open: {:?}", gates(&created));
    bound_pod(&ns, "no-controller").await;
    webhooks
        .delete(&config.name_any(), &DeleteParams::default())
        .await
        .unwrap();

    // 4. A Pod gated and labelled as the webhook does, and no gpu-dra-controller to allocate it:
    // gpu-controller lifts the gate after 30 s and says so; the scheduler binds the Pod.
    ns.api::<Pod>()
        .delete("no-controller", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    install_crds(&client).await;
    let (lifter, _port) = start_controller(&ns, ws.dir.path(), "Debug", true).await;
    let mut stuck = pod(
        "stuck",
        node.name(),
        json!({"claims": [{"name": "gpu"}]}),
        json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "best-fit"}],
               "schedulingGates": [{"name": GATE}]}),
    );
    stuck.labels_mut().insert(ALLOCATION_GATE_LABEL.into(), "true".into());
    create(&ns.api::<Pod>(), &stuck).await;
    let bound = bound_pod(&ns, "stuck").await;
    assert!(
        gates(&bound).is_empty(),
        "lifted: {:?}\n{}",
        gates(&bound),
        lifter.log()
    );
    assert!(
        !listed_as_gated(&bound),
        "the lifter took the label off with the gate: {:?}",
        bound.labels()
    );
    let note = lifted_note(&ns, "stuck").await;
    assert!(note.contains("did not allocate the Pod's claims within 30s"), "{note}");
}
