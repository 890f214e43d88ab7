//! The test bed's own promises: a registered node stays Ready while its heartbeat runs (and goes
//! Unknown without one), a minted ServiceAccount client has exactly the RBAC it was given, and a
//! control-plane server that exits is started again.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use testbed::{Access, Progress, ReadyNode, TestCluster, TestNamespace, wait_until};

fn ready_status(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_keeps_a_node_ready_past_the_grace_period() {
    let ns = TestNamespace::create("heartbeat").await.unwrap();
    let alive = ReadyNode::register(&ns, "alive", BTreeMap::new()).await.unwrap();
    let silent = ReadyNode::register(&ns, "silent", BTreeMap::new()).await.unwrap();
    let silent_name = silent.name().to_owned();
    drop(silent); // stops its heartbeat

    let nodes = Api::<Node>::all(ns.client());
    // The test bed's node-monitor-grace-period is 20s: the silent node must go Unknown.
    wait_until(
        &format!("node {silent_name} to lose Ready"),
        Duration::from_secs(60),
        || async {
            let node = nodes.get(&silent_name).await?;
            Ok(match ready_status(&node).as_str() {
                "Unknown" => Progress::Done(()),
                other => Progress::Pending(format!("Ready={other}")),
            })
        },
    )
    .await
    .unwrap();

    let node = nodes.get(alive.name()).await.unwrap();
    assert_eq!(ready_status(&node), "True", "the node with a heartbeat is still Ready");
    let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
    assert!(
        taints.iter().all(|t| !t.key.starts_with("node.kubernetes.io/")),
        "no lifecycle taints on a live node: {taints:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_client_has_exactly_its_rbac() {
    let ns = TestNamespace::create("sa-token").await.unwrap();
    let read_pods = PolicyRule {
        api_groups: Some(vec![String::new()]),
        resources: Some(vec!["pods".into()]),
        verbs: vec!["get".into(), "list".into()],
        ..PolicyRule::default()
    };
    let reader = ns
        .client_as("pod-reader", Access::Namespaced(vec![read_pods]))
        .await
        .unwrap();

    let pods = Api::<Pod>::namespaced(reader.clone(), ns.name());
    assert!(
        pods.list(&ListParams::default()).await.is_ok(),
        "listing pods is granted"
    );

    let config_maps = Api::<ConfigMap>::namespaced(reader.clone(), ns.name());
    let denied = config_maps
        .create(&PostParams::default(), &ConfigMap::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&denied, kube::Error::Api(status) if status.code == 403
            && status.message.contains(&format!("system:serviceaccount:{}:pod-reader", ns.name()))),
        "writing config maps is forbidden for exactly this account: {denied:?}"
    );
    let other_namespace = Api::<Pod>::namespaced(reader, "default")
        .list(&ListParams::default())
        .await;
    assert!(
        matches!(&other_namespace, Err(kube::Error::Api(status)) if status.code == 403),
        "a namespaced role does not reach other namespaces: {other_namespace:?}"
    );
}

/// As a node's kubelet restarts a control-plane static Pod, the test bed starts again a server that
/// exits: kube-controller-manager ended alone, as a panic ends it (v1.34.4's ResourceSlice tracker
/// did so in a full run, and every later test failed), is back and runs its controllers: a
/// ReplicaSet created after the end gets its Pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_server_that_exits_is_started_again() {
    let cluster = TestCluster::private_of_the_shared_release("supervised").await.unwrap();
    let component = "kube-controller-manager";
    let ended = cluster.end_server_process(component).unwrap();
    wait_until(
        "a new kube-controller-manager process",
        Duration::from_secs(30),
        || async {
            Ok(match cluster.server_process(component)? {
                Some(pid) if pid != ended => Progress::Done(()),
                other => Progress::Pending(format!("{other:?} (ended {ended})")),
            })
        },
    )
    .await
    .unwrap();

    let client = cluster.client();
    let ns = "supervised";
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let replicas: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "after-the-end"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "after-the-end"}},
            "template": {
                "metadata": {"labels": {"app": "after-the-end"}},
                "spec": {
                    "automountServiceAccountToken": false,
                    "containers": [{"name": "c", "image": "registry.testbed.invalid/pause"}]
                }
            }
        }
    }))
    .unwrap();
    Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &replicas)
        .await
        .unwrap();
    let pods = Api::<Pod>::namespaced(client, ns);
    wait_until(
        "the ReplicaSet's Pod, made by the restarted controller manager",
        Duration::from_secs(60),
        || async {
            let made = pods.list(&ListParams::default().labels("app=after-the-end")).await?;
            Ok(match made.items.len() {
                1 => Progress::Done(()),
                n => Progress::Pending(format!("{n} Pods")),
            })
        },
    )
    .await
    .unwrap();
    let log = cluster.server_log(component).unwrap();
    assert!(
        log.contains("testbed: ") && log.contains("kube-controller-manager exited with status 137; starting it again"),
        "the supervisor logs the exit: {}",
        log.lines()
            .filter(|l| l.starts_with("testbed: "))
            .collect::<Vec<_>>()
            .join("; ")
    );
}
