//! Two hooks of the module's hooks binary against the real API server, as addon-operator runs
//! them: nodes the module cannot serve are reported on the Node, and disabling the module removes
//! everything it created (PhysicalGPUs, node labels, slices, Events, its scheduling gate and gate label
//! on Pods) and nothing else.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;
use support::components::install_crds;
use support::module_hooks::{apply_object_patches, events_about, run_hook, values, version_of};
use support::node_objects::create_node;
use testbed::{Access, Progress, TestCluster, TestNamespace, wait_until};

const NODE: &str = "module-hooks-worker";

fn physical_gpu(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
        "metadata": {"name": name, "labels": {"gpu.deckhouse.io/node": NODE}}, "spec": {}}))
    .unwrap()
}

fn slice(name: &str, driver: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": NODE, "pool": {"name": format!("gpus/{NODE}"), "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu0"}]}}))
    .unwrap()
}

const GATE: &str = "gpu.deckhouse.io/allocation";
const GATE_LABEL: &str = "gpu.deckhouse.io/allocation-gate";
const QUOTA_GATE: &str = "example.com/quota";

/// A Pod held by `gates`, with `labels`: what the webhook leaves on a Pod it gated while a queue
/// holds it too.
fn held_pod(name: &str, gates: &[&str], labels: &[(&str, &str)]) -> Pod {
    let gates: Vec<_> = gates.iter().map(|g| json!({"name": g})).collect();
    let labels: serde_json::Map<String, serde_json::Value> =
        labels.iter().map(|(k, v)| ((*k).to_owned(), json!(v))).collect();
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause"}], "schedulingGates": gates}}))
    .unwrap()
}

fn gates_and_labels(pod: &Pod) -> (Vec<String>, BTreeMap<String, String>) {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.clone());
    let gates = gates.unwrap_or_default().into_iter().map(|g| g.name).collect();
    (gates, pod.metadata.labels.clone().unwrap_or_default())
}

async fn dynamic(client: &kube::Client, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let (resource, _) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .unwrap();
    Api::all_with(client.clone(), &resource)
}

/// Lets ServiceAccount `account` of `ns` list Events in `default` (where the hooks record theirs) and in
/// no other namespace: a RoleBinding there, whose name this returns (outside the test's namespace, so
/// the test deletes it).
async fn read_events_in_default(ns: &TestNamespace, account: &str) -> String {
    let client = ns.client();
    let role = ns.unique("events-reader");
    let cluster_role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": role, "labels": ns.owner_labels()},
        "rules": [{"apiGroups": [""], "resources": ["events"], "verbs": ["list"]}]}))
    .unwrap();
    Api::all(client.clone())
        .create(&PostParams::default(), &cluster_role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": role, "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns.name()}]}))
    .unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let user = format!("system:serviceaccount:{}:{account}", ns.name());
    let reviews = Api::<SubjectAccessReview>::all(client);
    wait_until(
        "the events reader is authorised",
        std::time::Duration::from_secs(30),
        || {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.clone()),
                    resource_attributes: Some(ResourceAttributes {
                        resource: Some("events".into()),
                        verb: Some("list".into()),
                        namespace: Some("default".into()),
                        ..ResourceAttributes::default()
                    }),
                    ..SubjectAccessReviewSpec::default()
                },
                ..SubjectAccessReview::default()
            };
            let reviews = reviews.clone();
            async move {
                let allowed = reviews
                    .create(&PostParams::default(), &review)
                    .await?
                    .status
                    .is_some_and(|s| s.allowed);
                Ok(if allowed {
                    Progress::Done(())
                } else {
                    Progress::Pending("not yet".into())
                })
            }
        },
    )
    .await
    .unwrap();
    role
}

/// A node whose GPUs are DriverReady without CDI gets an Event (and bootstrap-nodes' driver-ready label),
/// a node that only carries node-manager's old label node.deckhouse.io/gpu gets none (NodeGroups decide that: module_node_groups); then disabling the module removes its PhysicalGPUs, node labels, slices and Events and leaves the
/// admin's label, another driver's slice and the Node alone; it takes our scheduling gate and gate
/// label off a Pod (the webhook is gone by then, so no Pod gets them again) and leaves another gate.
#[tokio::test]
async fn unserved_nodes_are_reported_and_disabling_removes_what_the_module_made() {
    let cluster = TestCluster::get().await.unwrap();
    let client = cluster.client();
    install_crds(&client).await;
    let labels = [
        ("gpu.deckhouse.io/os.id", "ubuntu"),
        ("gpu.deckhouse.io/kernel.version", "6.8.0-45-generic"),
        ("gpu.deckhouse.io/allow-mig", "false"),
        ("gpu.deckhouse.io/cdi", "false"),
        ("gpu.deckhouse.io/nvidia-gpu", "true"),
    ];
    let node_manager = "module-hooks-node-manager-gpu";
    let nodes = Api::<Node>::all(client.clone());
    for node in [NODE, node_manager] {
        let _ = nodes.delete(node, &Default::default()).await;
    }
    create_node(&client, NODE, &labels).await;
    create_node(&client, node_manager, &[("node.deckhouse.io/gpu", "")]).await;

    // bootstrap-nodes with the snapshots addon-operator would give it.
    let contexts = json!([{"binding": "beforeHelm", "snapshots": {
        "physicalgpus": [{"filterResult": {"node": NODE, "vendor": "10de", "driverReady": "True"}}],
        "nodes": [{"filterResult": {"name": NODE, "cdi": "false"}},
                  {"filterResult": {"name": node_manager, "cdi": ""}}]}}]);
    let run = run_hook(
        "bootstrap-nodes",
        cluster.kubeconfig_path(),
        &contexts,
        &values(&version_of(&cluster).await),
    );
    apply_object_patches(&client, &run.kubernetes_patch).await;
    let labelled = nodes.get(NODE).await.unwrap().metadata.labels.unwrap_or_default();
    assert_eq!(
        labelled.get(gpu_api::labels::NODE_DRIVER_READY).map(String::as_str),
        Some("true"),
        "bootstrap-nodes labels the node whose GPU is DriverReady"
    );
    let reasons =
        |events: BTreeMap<String, Event>| events.values().filter_map(|e| e.reason.clone()).collect::<Vec<_>>();
    assert_eq!(reasons(events_about(&client, "Node", NODE).await), ["CDIDisabled"]);
    assert!(reasons(events_about(&client, "Node", node_manager).await).is_empty());
    assert_eq!(
        run.metrics
            .iter()
            .filter(|m| m["name"] == "d8_gpu_node_not_served")
            .count(),
        1
    );

    // What a running module leaves in the cluster: a PhysicalGPU, slices of ours and of another driver.
    let gpus = dynamic(&client, "gpu.deckhouse.io", "v1alpha1", "PhysicalGPU").await;
    gpus.create(&PostParams::default(), &physical_gpu("module-hooks-worker-0-10de-20b7"))
        .await
        .unwrap();
    let slices = dynamic(&client, "resource.k8s.io", "v1", "ResourceSlice").await;
    slices
        .create(&PostParams::default(), &slice("module-hooks-ours", "gpu.deckhouse.io"))
        .await
        .unwrap();
    slices
        .create(&PostParams::default(), &slice("module-hooks-theirs", "example.com"))
        .await
        .unwrap();

    // The hook lists only what is the module's: its Events in their namespace (a reader allowed no other
    // Events still runs it), every PhysicalGPU, Node, ResourceSlice and ResourceClaim (a claim's driver is
    // no field the API server selects on).
    let ns = TestNamespace::create("module-hooks-cleanup").await.unwrap();
    let pods = ns.api::<Pod>();
    let ours_and_queue = held_pod(
        "gated-and-queued",
        &[QUOTA_GATE, GATE],
        &[("app", "train"), (GATE_LABEL, "true")],
    );
    let queue_only = held_pod("queued", &[QUOTA_GATE], &[("app", "train")]);
    for pod in [&ours_and_queue, &queue_only] {
        pods.create(&PostParams::default(), pod).await.unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let reads = |group: &str, resource: &str| PolicyRule {
        api_groups: Some(vec![group.into()]),
        resources: Some(vec![resource.into()]),
        verbs: vec!["list".into()],
        ..PolicyRule::default()
    };
    let kubeconfig = ns
        .kubeconfig_as(
            "cleanup-on-disable",
            Access::Cluster(vec![
                reads("gpu.deckhouse.io", "physicalgpus"),
                reads("", "nodes"),
                reads("resource.k8s.io", "resourceslices"),
                reads("resource.k8s.io", "resourceclaims"),
                reads("", "pods"),
            ]),
            dir.path(),
        )
        .await
        .unwrap();
    let events_reader = read_events_in_default(&ns, "cleanup-on-disable").await;
    let run = run_hook(
        "cleanup-on-disable",
        &kubeconfig,
        &json!([{"binding": "afterDeleteHelm"}]),
        &values(&version_of(&cluster).await),
    );
    apply_object_patches(&client, &run.kubernetes_patch).await;

    // shell-operator deletes in the foreground: the objects go once the garbage collector is done.
    wait_until(
        "every PhysicalGPU and our slice are gone",
        std::time::Duration::from_secs(30),
        || async {
            let gpus_left = gpus.list(&ListParams::default()).await?.items.len();
            let ours_left = slices.get_opt("module-hooks-ours").await?.is_some();
            Ok(if gpus_left == 0 && !ours_left {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{gpus_left} PhysicalGPUs, our slice left: {ours_left}"))
            })
        },
    )
    .await
    .unwrap();
    assert!(
        slices.get_opt("module-hooks-theirs").await.unwrap().is_some(),
        "another driver's slice stays"
    );
    let node = Api::<Node>::all(client.clone()).get(NODE).await.unwrap();
    let left: Vec<String> = node
        .metadata
        .labels
        .unwrap()
        .into_keys()
        .filter(|k| k.starts_with("gpu.deckhouse.io/"))
        .collect();
    assert_eq!(left, ["gpu.deckhouse.io/allow-mig"], "only the admin's label stays");
    assert!(
        events_about(&client, "Node", NODE).await.is_empty(),
        "the hooks' Events are gone"
    );
    assert!(events_about(&client, "Node", node_manager).await.is_empty());
    let train = BTreeMap::from([("app".to_owned(), "train".to_owned())]);
    assert_eq!(
        gates_and_labels(&pods.get("gated-and-queued").await.unwrap()),
        (vec![QUOTA_GATE.to_owned()], train.clone()),
        "our gate and gate label are off the Pod, the queue's gate and the user's label stay"
    );
    assert_eq!(
        gates_and_labels(&pods.get("queued").await.unwrap()),
        (vec![QUOTA_GATE.to_owned()], train),
        "a Pod we never gated is untouched"
    );
    slices.delete("module-hooks-theirs", &Default::default()).await.unwrap();
    Api::<RoleBinding>::namespaced(client.clone(), "default")
        .delete(&events_reader, &DeleteParams::default())
        .await
        .unwrap();
    for node in [NODE, node_manager] {
        nodes.delete(node, &Default::default()).await.unwrap();
    }
}
