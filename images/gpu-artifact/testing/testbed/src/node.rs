//! A Node that stays Ready without a kubelet: status posted once, Lease renewed in the background.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Node, NodeCondition, NodeStatus, NodeSystemInfo};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::ObjectMeta;
use kube::{Api, Client};
use tokio::task::JoinHandle;

use crate::TestNamespace;

const FIELD_MANAGER: &str = "testbed-node-heartbeat";
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// A registered Node whose heartbeat runs until this value is dropped.
pub struct ReadyNode {
    name: String,
    heartbeat: JoinHandle<()>,
}

impl ReadyNode {
    /// Registers `<namespace>-<suffix>` with the given labels, posts a Ready status with room for
    /// pods, and keeps its Lease fresh so the node lifecycle controller never marks it unreachable.
    pub async fn register(ns: &TestNamespace, suffix: &str, labels: BTreeMap<String, String>) -> anyhow::Result<Self> {
        let name = ns.unique(suffix);
        let client = ns.client();
        let mut all_labels = ns.owner_labels();
        all_labels.insert("kubernetes.io/hostname".into(), name.clone());
        all_labels.insert("kubernetes.io/os".into(), "linux".into());
        all_labels.extend(labels);
        let node = Node {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(all_labels),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        let nodes = Api::<Node>::all(client.clone());
        nodes.create(&PostParams::default(), &node).await?;
        post_ready_status(&nodes, &name).await?;
        renew_lease(&client, &name).await?;
        let heartbeat = tokio::spawn(heartbeat(client, name.clone()));
        Ok(Self { name, heartbeat })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ReadyNode {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

async fn heartbeat(client: Client, name: String) {
    let nodes = Api::<Node>::all(client.clone());
    let mut tick = 0u32;
    loop {
        tokio::time::sleep(Duration::from_secs(5)).await;
        tick += 1;
        if let Err(error) = renew_lease(&client, &name).await {
            tracing::warn!(node = %name, %error, "lease renewal failed");
        }
        if tick.is_multiple_of(6)
            && let Err(error) = post_ready_status(&nodes, &name).await
        {
            tracing::warn!(node = %name, %error, "node status update failed");
        }
    }
}

async fn post_ready_status(nodes: &Api<Node>, name: &str) -> anyhow::Result<()> {
    let now = Time(Timestamp::now());
    let room = BTreeMap::from([
        ("cpu".to_owned(), Quantity("64".into())),
        ("memory".to_owned(), Quantity("256Gi".into())),
        ("pods".to_owned(), Quantity("110".into())),
    ]);
    let status = NodeStatus {
        capacity: Some(room.clone()),
        allocatable: Some(room),
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: Some("KubeletReady".into()),
            message: Some("simulated by the test bed".into()),
            last_heartbeat_time: Some(now.clone()),
            last_transition_time: Some(now),
        }]),
        node_info: Some(NodeSystemInfo {
            kubelet_version: "v1.34.0-testbed".into(),
            operating_system: "linux".into(),
            architecture: "amd64".into(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    };
    let patch = serde_json::json!({ "apiVersion": "v1", "kind": "Node", "status": status });
    nodes
        .patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch))
        .await?;
    Ok(())
}

async fn renew_lease(client: &Client, node: &str) -> anyhow::Result<()> {
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(node.to_owned()),
            namespace: Some(LEASE_NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_owned()),
            lease_duration_seconds: Some(40),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), LEASE_NAMESPACE)
        .patch(node, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&lease))
        .await?;
    Ok(())
}
