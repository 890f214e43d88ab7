//! Queued Pods hold no GPU (issue 31, item 2), with the real Kueue (v0.17.0, built from its Go
//! module) beside the module: Kueue's plain-Pod integration and gpu-dra-controller's webhook both
//! gate the Pods of a queue whose quota is one MIG partition of our class, counted by Kueue's DRA
//! support (`deviceClassMappings`: `gpu.deckhouse.io/<class>`). On a node with an A30 (the real
//! gpu-handler and the kubelet simulator over the real sockets), the admitted Pod is allocated best
//! fit by gpu-dra-controller and runs; the queued one holds no device while a Pod outside the queue,
//! created after it, is served; when the first Pod ends, Kueue admits the second, and it runs.

mod handler_node;
mod plugin_node;
mod support;

use host_fixtures::NamedHost;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use plugin_node::PluginNode;
use serde_json::{Value, json};
use support::allocation_webhook::start_gating_controller;
use support::components::AgentWorkspace;
use support::kueue::Kueue;
use support::*;
use testbed::TestNamespace;

const OUR_GATE: &str = "gpu.deckhouse.io/allocation";
const KUEUE_GATE: &str = "kueue.x-k8s.io/admission";

/// A Pod on `node` whose claim comes from the template `mig`, in the queue `queue` when given.
fn mig_pod(name: &str, node: &str, queue: Option<&str>) -> Pod {
    let mut pod = templated_pod(name, node, "mig");
    pod.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]})).unwrap());
    if let Some(queue) = queue {
        pod.labels_mut()
            .insert("kueue.x-k8s.io/queue-name".into(), queue.into());
    }
    pod
}

fn gates_of(pod: &Pod) -> Vec<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.clone());
    gates.unwrap_or_default().into_iter().map(|g| g.name).collect()
}

/// The claim made for the Pod `pod` from its template, once the controller-manager made it.
async fn claim_of(ns: &TestNamespace, pod: &str) -> ResourceClaim {
    let pods = ns.api::<Pod>();
    let name = testbed::wait_until(
        &format!("the claim of {pod}"),
        std::time::Duration::from_secs(30),
        || async {
            let status = pods.get(pod).await?.status.and_then(|s| s.resource_claim_statuses);
            Ok(
                match status.and_then(|s| s.first().and_then(|c| c.resource_claim_name.clone())) {
                    Some(name) => testbed::Progress::Done(name),
                    None => testbed::Progress::Pending("no claim yet".into()),
                },
            )
        },
    )
    .await
    .unwrap();
    ns.api::<ResourceClaim>().get(&name).await.unwrap()
}

fn writers(claim: &ResourceClaim) -> Vec<String> {
    claim
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect()
}

fn condition<'w>(workload: &'w Value, kind: &str) -> Option<&'w Value> {
    workload["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_pod_holds_no_gpu_and_runs_once_admitted() {
    let node = PluginNode::start("kueue", NamedHost::A30Pcie, &[]).await;
    let ns = &node.s.ns;
    let name = node.s.node.name().to_owned();
    let class = create(
        &Api::<DeviceClass>::all(ns.client()),
        &device_type_class(ns, "mig", "MIG"),
    )
    .await
    .name_any();
    one_request_template(ns, "mig", json!({"deviceClassName": class}), None).await;
    let ws = AgentWorkspace::new();
    let (controller, webhook) = start_gating_controller(ns, &ws).await;
    let quota = format!("gpu.deckhouse.io/{class}");
    let kueue = Kueue::start(ns, ws.dir.path(), &[(quota.clone(), vec![class.clone()])]).await;
    kueue.queue(ns, "gpus", &[("cpu", "10"), (quota.as_str(), "1")]).await;
    let pods = ns.api::<Pod>();
    let pool = format!("gpus/{name}");

    // 1. The first Pod of the queue: both webhooks gate it, Kueue admits it (the quota has room),
    //    gpu-dra-controller allocates it best fit, and it runs.
    let created = create(&pods, &mig_pod("first", &name, Some("gpus"))).await;
    let gates = gates_of(&created);
    assert!(
        gates.contains(&OUR_GATE.to_owned()) && gates.contains(&KUEUE_GATE.to_owned()),
        "both gates at admission: {gates:?}"
    );
    node.wait_prepared("first").await;
    let first = claim_of(ns, "first").await;
    assert_eq!(
        allocated_devices(&first),
        vec![(pool.clone(), "gpu0-mig-1g6gb-0".to_owned())],
        "best fit: the smallest partition"
    );
    assert!(writers(&first).contains(&"gpu-dra-controller".to_owned()));

    // 2. The second Pod waits in the queue: Kueue counts the partition against the quota; it holds
    //    no device, though a Pod outside the queue created after it is served.
    create(&pods, &mig_pod("second", &name, Some("gpus"))).await;
    let pending = |w: &Value| condition(w, "QuotaReserved").is_some_and(|c| c["status"] == "False");
    let workload = kueue.workload_of(ns, "second", "kept waiting", pending).await;
    let requests = &workload["status"]["resourceRequests"][0]["resources"];
    assert_eq!(requests[&quota], "1", "Kueue counts our class: {}", workload["status"]);
    let reserved = condition(&workload, "QuotaReserved").cloned().unwrap_or_default();
    assert!(
        reserved["message"].as_str().unwrap_or_default().contains(&quota),
        "the quota on our class holds it: {reserved}"
    );
    create(&pods, &mig_pod("outside", &name, None)).await;
    node.wait_prepared("outside").await;
    let second = pods.get("second").await.unwrap();
    assert!(gates_of(&second).contains(&KUEUE_GATE.to_owned()), "still queued");
    assert_eq!(
        allocated_devices(&claim_of(ns, "second").await),
        vec![],
        "a queued Pod holds no device"
    );

    // 3. The first Pod ends: Kueue admits the second, gpu-dra-controller allocates it, and it runs.
    let done = json!({"status": {"phase": "Succeeded"}});
    pods.patch_status("first", &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
    node.wait_prepared("second").await;
    let second = claim_of(ns, "second").await;
    assert_eq!(allocated_devices(&second).len(), 1);
    assert!(writers(&second).contains(&"gpu-dra-controller".to_owned()));

    kueue.clean_up(ns).await;
    Api::<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration>::all(ns.client())
        .delete(&webhook.name_any(), &Default::default())
        .await
        .unwrap();
    drop(controller);
}
