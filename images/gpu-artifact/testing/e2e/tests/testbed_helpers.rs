//! The test bed's own promises: a registered node stays Ready while its heartbeat runs (and goes
//! Unknown without one), and a minted ServiceAccount client has exactly the RBAC it was given.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::Api;
use kube::api::{ListParams, PostParams};
use testbed::{Access, Progress, ReadyNode, TestNamespace, wait_until};

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
