//! Which nodes the module leaves to Deckhouse's node-manager is decided from NodeGroups: the hook
//! node-groups fed as addon-operator feeds it (NodeGroups of `deckhouse.io/v1` and Nodes listed from the
//! real API server, each through the binding's jqFilter by the real jq). A node of a NodeGroup with
//! `spec.gpu` is left to node-manager and reported with the steps of its sharing mode; a node that
//! still carries node-manager's old label `node.deckhouse.io/gpu` in a NodeGroup without `spec.gpu` is
//! served; removing `spec.gpu` hands the NodeGroup's nodes to the module and clears the report.
//! NodeGroup's CRD belongs to node-manager, which the test bed does not run: a stand-in CRD that keeps
//! any field serves the objects.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use support::module_hooks::{apply_object_patches, binding_context, events_about, run_hook, values, version_of};
use support::node_objects::create_node;
use testbed::{Progress, TestNamespace, wait_until};

fn node_groups() -> ApiResource {
    ApiResource {
        group: "deckhouse.io".into(),
        version: "v1".into(),
        api_version: "deckhouse.io/v1".into(),
        kind: "NodeGroup".into(),
        plural: "nodegroups".into(),
    }
}

/// node-manager's NodeGroup kind, served without its schema.
async fn serve_node_groups(client: &kube::Client) {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "metadata": {"name": "nodegroups.deckhouse.io"},
        "spec": {"group": "deckhouse.io", "scope": "Cluster",
                 "names": {"plural": "nodegroups", "singular": "nodegroup", "kind": "NodeGroup"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                     "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}))
    .unwrap();
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(
            "nodegroups.deckhouse.io",
            &PatchParams::apply("module-node-groups").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
    let api = Api::<DynamicObject>::all_with(client.clone(), &node_groups());
    wait_until("NodeGroups are served", Duration::from_secs(30), || {
        let api = api.clone();
        async move {
            Ok(match api.list(&Default::default()).await {
                Ok(_) => Progress::Done(()),
                Err(e) => Progress::Pending(e.to_string()),
            })
        }
    })
    .await
    .unwrap();
}

/// Runs node-groups on what the cluster holds now; returns (the NodeGroups it leaves to node-manager,
/// the labels of every `d8_gpu_node_not_served` series it sets, the run).
async fn node_groups_run(cluster: &testbed::TestCluster) -> (Vec<String>, Vec<Value>, support::module_hooks::HookRun) {
    let client = cluster.client();
    let contexts = binding_context(&client, "node-groups").await;
    let run = run_hook(
        "node-groups",
        cluster.kubeconfig_path(),
        &contexts,
        &values(&version_of(cluster).await),
    );
    let op = run
        .values_patch
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["path"] == "/gpu/internal/nodeManagerGPU")
        .expect("the NodeGroups of node-manager in the values");
    let groups = serde_json::from_value(op["value"]["nodeGroups"].clone()).unwrap();
    let series = run
        .metrics
        .iter()
        .filter(|m| m["action"] == "set" && m["name"] == "d8_gpu_node_not_served")
        .map(|m| m["labels"].clone())
        .collect();
    (groups, series, run)
}

#[tokio::test]
async fn node_groups_with_spec_gpu_decide_which_nodes_stay_with_node_manager() {
    let ns = TestNamespace::create("module-node-groups").await.unwrap();
    let cluster = ns.cluster().clone();
    let client = cluster.client();
    serve_node_groups(&client).await;
    let groups = Api::<DynamicObject>::all_with(client.clone(), &node_groups());
    let exclusive = ns.unique("gpu-exclusive");
    let mig = ns.unique("gpu-mig");
    let plain = ns.unique("plain");
    for (name, gpu) in [
        (&exclusive, json!({"sharing": "Exclusive"})),
        (&mig, json!({"sharing": "MIG", "mig": {"partedConfig": "all-1g.5gb"}})),
        (&plain, Value::Null),
    ] {
        let mut spec = json!({"nodeType": "Static"});
        if !gpu.is_null() {
            spec["gpu"] = gpu;
        }
        let object: DynamicObject = serde_json::from_value(
            json!({"apiVersion": "deckhouse.io/v1", "kind": "NodeGroup", "metadata": {"name": name}, "spec": spec}),
        )
        .unwrap();
        groups.create(&Default::default(), &object).await.unwrap();
    }
    let group_label = "node.deckhouse.io/group";
    let nodes = [
        (ns.unique("n-exclusive"), vec![(group_label, exclusive.as_str())]),
        (ns.unique("n-mig"), vec![(group_label, mig.as_str())]),
        // Labelled by node-manager while its NodeGroup had spec.gpu; node-manager never removes it.
        (
            ns.unique("n-old"),
            vec![(group_label, plain.as_str()), ("node.deckhouse.io/gpu", "")],
        ),
        (ns.unique("n-plain"), vec![(group_label, plain.as_str())]),
    ];
    for (name, labels) in &nodes {
        create_node(&client, name, labels).await;
    }

    let (left, series, run) = node_groups_run(&cluster).await;
    assert!(left.contains(&exclusive) && left.contains(&mig), "{left:?}");
    assert!(!left.contains(&plain), "{left:?}");
    let ours: Vec<&Value> = series
        .iter()
        .filter(|s| nodes.iter().any(|(n, _)| s["node"] == n.as_str()))
        .collect();
    assert_eq!(
        ours,
        [
            &json!({"node": nodes[0].0, "reason": "NodeGroupHasGPU", "node_group": exclusive, "sharing": "Exclusive"}),
            &json!({"node": nodes[1].0, "reason": "NodeGroupHasGPU", "node_group": mig, "sharing": "MIG"}),
        ]
    );
    apply_object_patches(&client, &run.kubernetes_patch).await;
    let event = events_about(&client, "Node", &nodes[1].0)
        .await
        .into_values()
        .next()
        .expect("an Event");
    assert_eq!(event.reason.as_deref(), Some("NodeGroupHasGPU"));
    let message = event.message.unwrap();
    assert!(
        message.contains("deviceType MIG") && message.contains(&format!("remove spec.gpu from NodeGroup {mig}")),
        "{message}"
    );
    assert!(
        events_about(&client, "Node", &nodes[2].0).await.is_empty(),
        "the old label decides nothing"
    );

    // The admin removes spec.gpu: the module serves the NodeGroup's node and the report goes.
    groups
        .patch(
            &exclusive,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"gpu": null}})),
        )
        .await
        .unwrap();
    let (left, series, run) = node_groups_run(&cluster).await;
    assert!(!left.contains(&exclusive) && left.contains(&mig), "{left:?}");
    assert!(!series.iter().any(|s| s["node"] == nodes[0].0.as_str()), "{series:?}");
    assert_eq!(
        run.metrics[0],
        json!({"group": "nodes_not_served_node_groups", "action": "expire"}),
        "the series of a served node expire"
    );

    for name in [&exclusive, &mig, &plain] {
        groups.delete(name, &DeleteParams::default()).await.unwrap();
    }
    for (name, _) in &nodes {
        Api::<Node>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
}
