//! The nodes the module does not serve, and why, where an admin sees it: a Warning Event on the Node,
//! the gauge `d8_gpu_node_not_served{node,reason}` (alert D8GpuNodeNotServed) and the module's docs.
//! Two reasons: the node's NodeGroup has `spec.gpu`, so Deckhouse's node-manager runs NVIDIA's own
//! stack there (device plugin, MIG manager, MPS daemon) and the module keeps every component off it;
//! or its GPUs are DriverReady but its container runtime has CDI off, so gpu-handler, which hands GPUs
//! to containers through CDI, cannot run there.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::json;
use time::OffsetDateTime;

use crate::object_patch::{Regarding, create_or_update, warning_event};
use crate::protocol::HookOutput;

const METRIC_GROUP: &str = "nodes_not_served";
pub const METRIC: &str = "d8_gpu_node_not_served";

/// What the `nodes` binding keeps of one Node.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeLabels {
    pub name: String,
    #[serde(default)]
    pub cdi: String,
    #[serde(default, rename = "nodeManagerGPU")]
    pub node_manager_gpu: bool,
}

const MANAGED_BY_NODE_MANAGER: &str = "The NodeGroup of this node has spec.gpu: Deckhouse's node-manager runs \
    NVIDIA's device plugin, MIG manager and MPS daemon here, so the gpu module leaves its GPUs alone (no \
    PhysicalGPU, no DRA offers). Remove spec.gpu from the NodeGroup to let the gpu module serve them.";
const CDI_DISABLED: &str = "This node's GPUs are DriverReady, but its container runtime has CDI off (the node has \
    no label gpu.deckhouse.io/cdi=true, which the module's NodeGroupConfiguration gpu-detect-node.sh sets once \
    containerd reports enable_cdi = true): gpu-handler does not run here and its GPUs are not offered. On \
    containerd 1.7 the module's NodeGroupConfiguration gpu-containerd-cdi.sh turns CDI on unless the node is \
    labelled gpu.deckhouse.io/containerd-cdi-config=false; ContainerdV2 has it on; a runtime Deckhouse does not \
    manage needs enable_cdi set by hand.";

/// Adds the report of `nodes` to `output`; `driver_ready` are the nodes whose GPUs are DriverReady.
pub fn report(nodes: &[NodeLabels], driver_ready: &BTreeSet<String>, now: OffsetDateTime, output: &mut HookOutput) {
    let mut unserved: Vec<(&str, &str, &str)> = Vec::new();
    for node in nodes {
        if node.node_manager_gpu {
            unserved.push((&node.name, "ManagedByNodeManager", MANAGED_BY_NODE_MANAGER));
        } else if driver_ready.contains(&node.name) && node.cdi != "true" {
            unserved.push((&node.name, "CDIDisabled", CDI_DISABLED));
        }
    }
    if unserved.is_empty() {
        output.expire_group(METRIC_GROUP);
    }
    for (node, reason, message) in unserved {
        output.set_gauge(METRIC_GROUP, METRIC, json!({"node": node, "reason": reason}), 1.0);
        let event = warning_event(&Regarding::node(node), "gpu-not-served", reason, message, now);
        output.kubernetes_patch.push(create_or_update(event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cdi: &str, node_manager_gpu: bool) -> NodeLabels {
        NodeLabels {
            name: name.into(),
            cdi: cdi.into(),
            node_manager_gpu,
        }
    }

    #[test]
    fn node_manager_nodes_and_ready_nodes_without_cdi_are_reported() {
        let nodes = [
            node("nm-gpu", "", true),
            node("no-cdi", "", false),
            node("served", "true", false),
            node("cpu-only", "", false),
        ];
        let ready = BTreeSet::from(["no-cdi".to_owned(), "served".to_owned()]);
        let mut output = HookOutput::default();
        report(&nodes, &ready, OffsetDateTime::UNIX_EPOCH, &mut output);
        let reported: Vec<(&str, &str)> = output
            .metrics
            .iter()
            .map(|m| {
                (
                    m["labels"]["node"].as_str().unwrap(),
                    m["labels"]["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            reported,
            [("nm-gpu", "ManagedByNodeManager"), ("no-cdi", "CDIDisabled")]
        );
        let events: Vec<&str> = output
            .kubernetes_patch
            .iter()
            .map(|op| op["object"]["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(events, ["node.nm-gpu.gpu-not-served", "node.no-cdi.gpu-not-served"]);
    }

    #[test]
    fn the_node_filter_result_parses() {
        let parsed: NodeLabels =
            serde_json::from_value(json!({"name": "a", "cdi": "true", "nodeManagerGPU": true})).unwrap();
        assert_eq!(parsed, node("a", "true", true));
    }

    #[test]
    fn when_every_node_is_served_the_old_series_expire() {
        let mut output = HookOutput::default();
        report(
            &[node("served", "true", false)],
            &BTreeSet::new(),
            OffsetDateTime::UNIX_EPOCH,
            &mut output,
        );
        assert_eq!(output.metrics, vec![json!({"group": METRIC_GROUP, "action": "expire"})]);
        assert!(output.kubernetes_patch.is_empty());
    }
}
