//! bootstrap-nodes: which nodes are ready for the node components that need a proven driver, from the
//! PhysicalGPUs the node agents keep. A node with an NVIDIA card whose DriverReady is True gets the
//! label `gpu.deckhouse.io/driver-ready=true`, which gpu-handler, DCGM and dcgm-exporter require;
//! a node without one loses it, and the DaemonSet controller removes their Pods there. (The driver
//! validator needs no hook: it goes where the NodeGroupConfiguration found an NVIDIA card, label
//! `gpu.deckhouse.io/nvidia-gpu=true`.) The label lives on the Node, not as a node list in the Pod
//! templates, so one node becoming DriverReady, or losing it, changes no template and restarts nothing
//! on any other node. addon-operator writes it with Deckhouse's rights; the node-scope policy lets no
//! node component write it. The templates keep gpu-handler off nodes without CDI; this hook reports
//! DriverReady nodes among them ([`super::unserved_nodes`]). Nodes of node-manager's NVIDIA stack are
//! the hook node-groups' ([`super::node_groups`]).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};

use gpu_api::labels::{NODE_CDI, NODE_DRIVER_READY};
use time::OffsetDateTime;

use super::unserved_nodes::{self, NodeLabels};
use crate::object_patch::merge_patch;
use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput, snapshot_binding};

const NVIDIA: &str = "10de";
const BINDING: &str = "physicalgpus";
const NODES: &str = "nodes";
/// One small object per PhysicalGPU: its node, its PCI vendor and its DriverReady status.
const JQ_FILTER: &str = r#"{"node": (.status.nodeInfo.nodeName // .metadata.labels."gpu.deckhouse.io/node"), "vendor": .status.pciInfo.vendor.id, "driverReady": ([.status.conditions[]? | select(.type == "DriverReady") | .status][0] // "Unknown")}"#;

pub fn config() -> HookConfig {
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "bootstrap-nodes",
            path: "gpu/bootstrap-nodes",
        },
        before_helm: Some(10),
        kubernetes: vec![
            snapshot_binding(BINDING, "gpu.deckhouse.io/v1alpha1", "PhysicalGPU", JQ_FILTER, true),
            snapshot_binding(NODES, "v1", "Node", &node_filter(), true),
        ],
        ..HookConfig::default()
    }
}

/// What the filter keeps of one PhysicalGPU.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeGpu {
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub vendor: Option<String>,
    #[serde(default)]
    pub driver_ready: Option<String>,
}

/// The nodes with an NVIDIA card whose DriverReady is True.
pub fn driver_ready_nodes(gpus: &[NodeGpu]) -> BTreeSet<String> {
    gpus.iter()
        .filter(|gpu| gpu.vendor.as_deref() == Some(NVIDIA) && gpu.driver_ready.as_deref() == Some("True"))
        .filter_map(|gpu| gpu.node.clone().filter(|n| !n.is_empty()))
        .collect()
}

/// The Node merge patches that make label `driver-ready` say `"true"` on exactly the nodes of
/// `driver_ready`: only nodes whose label is wrong are patched, so a node that stays as it was is
/// never written.
pub fn driver_ready_labels(nodes: &[NodeLabels], driver_ready: &BTreeSet<String>) -> Vec<Value> {
    nodes
        .iter()
        .filter_map(|node| {
            let want = driver_ready.contains(&node.name);
            let value = match (want, node.driver_ready.as_str()) {
                (true, "true") | (false, "") => return None,
                (true, _) => json!("true"),
                (false, _) => Value::Null,
            };
            let labels = json!({"metadata": {"labels": {NODE_DRIVER_READY: value}}});
            Some(merge_patch("v1", "Node", &node.name, labels))
        })
        .collect()
}

/// One small object per Node: its name, whether its runtime has CDI on, and its driver-ready label.
fn node_filter() -> String {
    format!(
        r#"{{"name": .metadata.name, "cdi": (.metadata.labels."{NODE_CDI}" // ""), "driverReady": (.metadata.labels."{NODE_DRIVER_READY}" // "")}}"#
    )
}

pub fn run(input: &HookInput) -> HookOutput {
    run_at(input, OffsetDateTime::now_utc())
}

pub fn run_at(input: &HookInput, now: OffsetDateTime) -> HookOutput {
    let gpus: Vec<NodeGpu> = input.snapshot_of(BINDING);
    let nodes: Vec<NodeLabels> = input.snapshot_of(NODES);
    let driver_ready = driver_ready_nodes(&gpus);
    let mut output = HookOutput::default();
    let no_cdi = unserved_nodes::cdi_disabled(&nodes, &driver_ready);
    unserved_nodes::report(unserved_nodes::cdi_metric_group(), &no_cdi, now, &mut output);
    output
        .kubernetes_patch
        .extend(driver_ready_labels(&nodes, &driver_ready));
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(node: &str, vendor: &str, ready: &str) -> NodeGpu {
        NodeGpu {
            node: Some(node.into()),
            vendor: Some(vendor.into()),
            driver_ready: Some(ready.into()),
        }
    }

    fn node(name: &str, driver_ready: &str) -> NodeLabels {
        NodeLabels {
            name: name.into(),
            cdi: "true".into(),
            driver_ready: driver_ready.into(),
        }
    }

    #[test]
    fn a_node_is_driver_ready_with_one_nvidia_card_whose_driver_is_proven() {
        let ready = driver_ready_nodes(&[
            gpu("worker-b", NVIDIA, "Unknown"),
            gpu("worker-a", NVIDIA, "True"),
            gpu("worker-a", NVIDIA, "False"),
            gpu("worker-c", "1002", "True"),
            gpu("", NVIDIA, "True"),
        ]);
        assert_eq!(ready.into_iter().collect::<Vec<_>>(), ["worker-a"]);
    }

    #[test]
    fn only_nodes_whose_label_is_wrong_are_patched() {
        let ready = BTreeSet::from(["worker-a".to_owned(), "worker-b".to_owned()]);
        let nodes = [
            node("worker-a", ""),
            node("worker-b", "true"),
            node("worker-c", "true"),
            node("worker-d", ""),
            node("worker-e", "false"),
        ];
        let patches = driver_ready_labels(&nodes, &ready);
        let by_node: Vec<(&str, &Value)> = patches
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap(),
                    &p["mergePatch"]["metadata"]["labels"][NODE_DRIVER_READY],
                )
            })
            .collect();
        assert_eq!(
            by_node,
            [
                ("worker-a", &json!("true")),
                ("worker-c", &Value::Null),
                ("worker-e", &Value::Null)
            ]
        );
        assert!(
            patches
                .iter()
                .all(|p| p["operation"] == "MergePatch" && p["kind"] == "Node")
        );
    }
}
