//! node-groups: which nodes Deckhouse's node-manager still serves with its own NVIDIA stack, decided
//! from the NodeGroups themselves (`deckhouse.io/v1`, `spec.gpu`) and each node's group
//! (`node.deckhouse.io/group`), never from the label `node.deckhouse.io/gpu`: node-manager's hook
//! `gpu_enabled` stops setting that label once the module `gpu` is enabled and never removes it
//! (deckhouse/deckhouse modules/040-node-manager/hooks/gpu/gpu_enabled.go), so it says nothing about
//! who serves a node.
//!
//! A NodeGroup with `spec.gpu` keeps node-manager's device plugin, MIG manager and `nvidia` default
//! runtime (bashible's 032_configure_containerd.sh.tpl), so the module leaves its nodes alone
//! (`internal.nodeManagerGPU.nodeGroups`, read by the node components' affinity) and reports each of them:
//! `d8_gpu_node_not_served{node, node_group, sharing, reason="NodeGroupHasGPU"}` (alert
//! D8GpuNodeGroupNotServed) and a Warning Event on the Node with the steps for its sharing mode. Once
//! `spec.gpu` is gone from the NodeGroup, the module serves its nodes.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::unserved_nodes::{self, Unserved};
use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput, snapshot_binding};

const NODE_GROUPS: &str = "nodegroups";
const NODES: &str = "nodes";
const METRIC_GROUP: &str = "nodes_not_served_node_groups";
pub const REASON: &str = "NodeGroupHasGPU";
/// The label node-manager puts on every node of a NodeGroup.
const GROUP_LABEL: &str = "node.deckhouse.io/group";

pub fn config() -> HookConfig {
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "node-groups",
            path: "gpu/node-groups",
        },
        before_helm: Some(10),
        kubernetes: vec![
            snapshot_binding(
                NODE_GROUPS,
                "deckhouse.io/v1",
                "NodeGroup",
                r#"{"name": .metadata.name, "gpu": (.spec.gpu // {})}"#,
                true,
            ),
            snapshot_binding(
                NODES,
                "v1",
                "Node",
                &format!(r#"{{"name": .metadata.name, "nodeGroup": (.metadata.labels."{GROUP_LABEL}" // "")}}"#),
                true,
            ),
        ],
        ..HookConfig::default()
    }
}

/// What the binding keeps of a NodeGroup: its name and `spec.gpu` as written.
#[derive(Debug, Clone, Deserialize)]
pub struct NodeGroupGpu {
    pub name: String,
    #[serde(default)]
    pub gpu: Value,
}

/// What the binding keeps of a Node.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeInGroup {
    pub name: String,
    #[serde(default)]
    pub node_group: String,
}

pub fn run(input: &HookInput) -> HookOutput {
    run_at(input, OffsetDateTime::now_utc())
}

pub fn run_at(input: &HookInput, now: OffsetDateTime) -> HookOutput {
    let groups: BTreeMap<String, Value> = input
        .snapshot_of::<NodeGroupGpu>(NODE_GROUPS)
        .into_iter()
        .filter(|g| has_gpu(&g.gpu))
        .map(|g| (g.name, g.gpu))
        .collect();
    let mut output = HookOutput::default();
    let names: BTreeSet<&String> = groups.keys().collect();
    output.set_value("internal/nodeManagerGPU", json!({"nodeGroups": names}));
    let unserved: Vec<Unserved> = input
        .snapshot_of::<NodeInGroup>(NODES)
        .into_iter()
        .filter_map(|node| {
            let gpu = groups.get(&node.node_group)?;
            Some(Unserved {
                labels: json!({"node": node.name, "reason": REASON, "node_group": node.node_group,
                               "sharing": sharing(gpu)}),
                message: steps(&node.node_group, gpu),
                node: node.name,
                reason: REASON,
            })
        })
        .collect();
    unserved_nodes::report(METRIC_GROUP, &unserved, now, &mut output);
    output
}

/// node-manager's own test of a NodeGroup's GPU support (`GPU.IsEmpty` in its hooks/internal/v1).
pub fn has_gpu(gpu: &Value) -> bool {
    ["sharing", "timeSlicing", "mig"]
        .iter()
        .any(|key| gpu.get(key).is_some_and(|v| !v.is_null() && v != ""))
}

/// `spec.gpu.sharing`, `Exclusive` when not set (node-manager's device plugin default).
fn sharing(gpu: &Value) -> String {
    match gpu.get("sharing").and_then(Value::as_str).unwrap_or_default() {
        "" => "Exclusive".to_owned(),
        other => other.to_owned(),
    }
}

/// What the admin does to move the NodeGroup `name` to the module, for its sharing mode
/// (docs/ADMIN_GUIDE.md, "Taking GPU NodeGroups over from node-manager").
fn steps(name: &str, gpu: &Value) -> String {
    let mode = sharing(gpu);
    let class = match mode.to_ascii_lowercase().as_str() {
        "timeslicing" => format!(
            "create a GPUClass with deviceType Physical and sharing.strategy TimeSlicing, put the label \
             gpu.deckhouse.io/allow-timeslicing: \"true\" into the NodeGroup's spec.nodeTemplate.labels, and let \
             each Pod ask for its share (capacity gpu.deckhouse.io/sharePercent, 100/{} for the same split) \
             instead of nvidia.com/gpu",
            gpu.pointer("/timeSlicing/partitionCount")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(1)
        ),
        "mig" => format!(
            "create a GPUClass with deviceType MIG for each profile of the MIG configuration {} (the module \
             makes a partition per claim, so there is no fixed layout to keep) and move the workloads from \
             nvidia.com/mig-* to it; after spec.gpu is removed, delete the MIG manager's instances \
             (nvidia-smi mig -dci, then -dgi) once nothing uses them",
            gpu.pointer("/mig/partedConfig")
                .and_then(Value::as_str)
                .unwrap_or("of the NodeGroup")
        ),
        _ => "create a GPUClass with deviceType Physical and move the workloads from nvidia.com/gpu to its \
              extended resource gpu.deckhouse.io/<class>"
            .to_owned(),
    };
    format!(
        "NodeGroup {name} has spec.gpu (sharing {mode}): Deckhouse's node-manager serves its GPUs with NVIDIA's \
         device plugin and the nvidia default runtime, so the gpu module stays off this node. To move it to \
         the module: {class}; then remove spec.gpu from NodeGroup {name}. node-manager removes its stack and \
         the module serves the nodes (see the module's admin guide, \"Taking GPU NodeGroups over from \
         node-manager\")."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_group_has_gpu_as_node_manager_decides_it() {
        assert!(has_gpu(&json!({"sharing": "Exclusive"})));
        assert!(has_gpu(&json!({"mig": {"partedConfig": "all-1g.5gb"}})));
        assert!(has_gpu(&json!({"timeSlicing": {"partitionCount": 4}})));
        assert!(!has_gpu(&json!({})));
        assert!(!has_gpu(&json!({"sharing": ""})));
    }

    #[test]
    fn each_sharing_mode_gets_its_own_steps() {
        let time_slicing = steps(
            "ts",
            &json!({"sharing": "TimeSlicing", "timeSlicing": {"partitionCount": 4}}),
        );
        assert!(
            time_slicing.contains("allow-timeslicing") && time_slicing.contains("100/4"),
            "{time_slicing}"
        );
        let mig = steps("m", &json!({"sharing": "MIG", "mig": {"partedConfig": "all-1g.5gb"}}));
        assert!(
            mig.contains("deviceType MIG") && mig.contains("all-1g.5gb") && mig.contains("-dgi"),
            "{mig}"
        );
        let exclusive = steps("e", &json!({"sharing": "Exclusive"}));
        assert!(exclusive.contains("deviceType Physical") && exclusive.contains("remove spec.gpu from NodeGroup e"));
    }
}
