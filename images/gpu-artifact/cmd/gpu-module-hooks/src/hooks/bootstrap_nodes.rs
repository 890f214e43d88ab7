//! bootstrap-nodes: which nodes each node component runs on, from the PhysicalGPUs the node agents
//! keep. The driver validator goes where NVIDIA cards are; gpu-handler, DCGM and dcgm-exporter where
//! a card's driver is proven (DriverReady=True). Each list comes with a hash the templates put on the
//! Pods, so a changed list rolls them. The templates keep gpu-handler off nodes without CDI; this hook
//! reports DriverReady nodes among them ([`super::unserved_nodes`]). Nodes of node-manager's NVIDIA stack
//! are the hook node-groups' ([`super::node_groups`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use gpu_api::labels::NODE_CDI;
use time::OffsetDateTime;

use super::unserved_nodes::{self, NodeLabels};
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

/// The sorted node list of every component, keyed as in `internal.bootstrap`.
pub type ComponentNodes = BTreeMap<&'static str, BTreeSet<String>>;

pub fn place_components(gpus: &[NodeGpu]) -> ComponentNodes {
    let mut nvidia = BTreeSet::new();
    let mut driver_ready = BTreeSet::new();
    for gpu in gpus {
        let Some(node) = gpu.node.clone().filter(|n| !n.is_empty()) else {
            continue;
        };
        if gpu.vendor.as_deref() != Some(NVIDIA) {
            continue;
        }
        nvidia.insert(node.clone());
        if gpu.driver_ready.as_deref() == Some("True") {
            driver_ready.insert(node);
        }
    }
    BTreeMap::from([
        ("validator", nvidia),
        ("gpuHandler", driver_ready.clone()),
        ("dcgm", driver_ready.clone()),
        ("dcgmExporter", driver_ready),
    ])
}

/// First 16 hex digits of the SHA-256 of the sorted names, one a line; empty for no nodes.
pub fn list_hash(nodes: &BTreeSet<String>) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    let joined: Vec<&str> = nodes.iter().map(String::as_str).collect();
    let digest = Sha256::digest(joined.join("\n").as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// One small object per Node: its name and whether its runtime has CDI on.
fn node_filter() -> String {
    format!(r#"{{"name": .metadata.name, "cdi": (.metadata.labels."{NODE_CDI}" // "")}}"#)
}

pub fn run(input: &HookInput) -> HookOutput {
    run_at(input, OffsetDateTime::now_utc())
}

pub fn run_at(input: &HookInput, now: OffsetDateTime) -> HookOutput {
    let gpus: Vec<NodeGpu> = input.snapshot_of(BINDING);
    let placed = place_components(&gpus);
    let mut output = HookOutput::default();
    let no_cdi = unserved_nodes::cdi_disabled(
        &input.snapshot_of::<NodeLabels>(NODES),
        &placed.get("gpuHandler").cloned().unwrap_or_default(),
    );
    unserved_nodes::report(unserved_nodes::cdi_metric_group(), &no_cdi, now, &mut output);
    let placement: serde_json::Map<String, Value> = placed
        .into_iter()
        .map(|(component, nodes)| (component.to_owned(), json!({"nodes": nodes, "hash": list_hash(&nodes)})))
        .collect();
    output.set_value("internal/bootstrap", Value::Object(placement));
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

    #[test]
    fn validator_follows_nvidia_cards_and_the_rest_follows_driver_ready() {
        let placed = place_components(&[
            gpu("worker-b", NVIDIA, "Unknown"),
            gpu("worker-a", NVIDIA, "True"),
            gpu("worker-a", NVIDIA, "False"),
            gpu("worker-c", "1002", "True"),
        ]);
        let names = |c: &str| placed[c].iter().cloned().collect::<Vec<_>>();
        assert_eq!(names("validator"), ["worker-a", "worker-b"]);
        assert_eq!(names("gpuHandler"), ["worker-a"]);
        assert_eq!(names("dcgm"), ["worker-a"]);
        assert_eq!(names("dcgmExporter"), ["worker-a"]);
    }

    #[test]
    fn the_hash_changes_with_the_list_and_is_empty_for_none() {
        let one = BTreeSet::from(["worker-a".to_owned()]);
        let two = BTreeSet::from(["worker-a".to_owned(), "worker-b".to_owned()]);
        assert_eq!(list_hash(&BTreeSet::new()), "");
        assert_eq!(list_hash(&one).len(), 16);
        assert_ne!(list_hash(&one), list_hash(&two));
    }
}
