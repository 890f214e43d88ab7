//! The nodes the module does not serve, and why, where an admin sees it: a Warning Event on the Node,
//! the gauge `d8_gpu_node_not_served{node,reason,...}` (alerts D8GpuNodeNotServed,
//! D8GpuNodeGroupNotServed) and the module's docs. Two hooks find such nodes, each reporting its own
//! reason in a metric group of its own: node-groups (`NodeGroupHasGPU`: the node's NodeGroup has
//! `spec.gpu`, so Deckhouse's node-manager runs NVIDIA's own stack there) and bootstrap-nodes
//! (`CDIDisabled`: the node's GPUs are DriverReady but its container runtime has CDI off, so
//! gpu-handler, which hands GPUs to containers through CDI, cannot run there).

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::object_patch::{Regarding, create_or_update, warning_event};
use crate::protocol::HookOutput;

pub const METRIC: &str = "d8_gpu_node_not_served";
const CDI_METRIC_GROUP: &str = "nodes_not_served";

/// A node the module does not serve: the labels of its series (`node` and `reason` at least), the
/// Event's reason and message.
#[derive(Debug, Clone, PartialEq)]
pub struct Unserved {
    pub node: String,
    pub reason: &'static str,
    pub labels: Value,
    pub message: String,
}

/// What the bootstrap-nodes `nodes` binding keeps of one Node.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct NodeLabels {
    pub name: String,
    #[serde(default)]
    pub cdi: String,
    /// The label bootstrap-nodes keeps (`gpu.deckhouse.io/driver-ready`), empty without it.
    #[serde(default)]
    pub driver_ready: String,
}

const CDI_DISABLED: &str = "This node's GPUs are DriverReady, but its container runtime has CDI off (the node has \
    no label gpu.deckhouse.io/cdi=true, which the module's NodeGroupConfiguration gpu-detect-node.sh sets once \
    containerd reports enable_cdi = true): gpu-handler does not run here and its GPUs are not offered. On \
    containerd 1.7 the module's NodeGroupConfiguration gpu-containerd-cdi.sh turns CDI on unless the node is \
    labelled gpu.deckhouse.io/containerd-cdi-config=false; ContainerdV2 has it on; a runtime Deckhouse does not \
    manage needs enable_cdi set by hand.";

/// The nodes of `nodes` whose GPUs are DriverReady (`driver_ready`) while their runtime has CDI off.
pub fn cdi_disabled(nodes: &[NodeLabels], driver_ready: &BTreeSet<String>) -> Vec<Unserved> {
    nodes
        .iter()
        .filter(|node| driver_ready.contains(&node.name) && node.cdi != "true")
        .map(|node| Unserved {
            node: node.name.clone(),
            reason: "CDIDisabled",
            labels: json!({"node": node.name, "reason": "CDIDisabled"}),
            message: CDI_DISABLED.to_owned(),
        })
        .collect()
}

/// The metric group of bootstrap-nodes' report.
pub fn cdi_metric_group() -> &'static str {
    CDI_METRIC_GROUP
}

/// Adds the report of `unserved` to `output`, in metric group `group` (whose earlier series go first,
/// so a node served again leaves no series behind).
pub fn report(group: &str, unserved: &[Unserved], now: OffsetDateTime, output: &mut HookOutput) {
    output.expire_group(group);
    for node in unserved {
        output.set_gauge(group, METRIC, node.labels.clone(), 1.0);
        let event = warning_event(
            &Regarding::node(&node.node),
            &format!("gpu-not-served-{}", node.reason),
            node.reason,
            &node.message,
            now,
        );
        output.kubernetes_patch.push(create_or_update(event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cdi: &str) -> NodeLabels {
        NodeLabels {
            name: name.into(),
            cdi: cdi.into(),
            driver_ready: String::new(),
        }
    }

    #[test]
    fn ready_nodes_without_cdi_are_reported_with_an_event_each() {
        let nodes = [node("no-cdi", ""), node("served", "true"), node("cpu-only", "")];
        let ready = BTreeSet::from(["no-cdi".to_owned(), "served".to_owned()]);
        let mut output = HookOutput::default();
        report(
            CDI_METRIC_GROUP,
            &cdi_disabled(&nodes, &ready),
            OffsetDateTime::UNIX_EPOCH,
            &mut output,
        );
        let reported: Vec<(&str, &str)> = output
            .metrics
            .iter()
            .filter(|m| m["action"] == "set")
            .map(|m| {
                (
                    m["labels"]["node"].as_str().unwrap(),
                    m["labels"]["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(reported, [("no-cdi", "CDIDisabled")]);
        let events: Vec<&str> = output
            .kubernetes_patch
            .iter()
            .map(|op| op["object"]["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(events, ["node.no-cdi.gpu-not-served-cdidisabled"]);
    }

    #[test]
    fn the_node_filter_result_parses() {
        let parsed: NodeLabels = serde_json::from_value(json!({"name": "a", "cdi": "true"})).unwrap();
        assert_eq!(parsed, node("a", "true"));
    }

    #[test]
    fn every_report_expires_the_old_series_first() {
        let mut output = HookOutput::default();
        report(CDI_METRIC_GROUP, &[], OffsetDateTime::UNIX_EPOCH, &mut output);
        assert_eq!(
            output.metrics,
            vec![json!({"group": CDI_METRIC_GROUP, "action": "expire"})]
        );
        assert!(output.kubernetes_patch.is_empty());
    }
}
