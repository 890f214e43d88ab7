//! Which nodes a gated Pod may run on, as far as the scheduler's filters that look at the Pod and
//! the Node alone tell: `spec.nodeName`, `nodeSelector`, required node affinity, the taints it
//! does not tolerate (NoSchedule, NoExecute) and a cordoned node. A gated Pod's claims are
//! allocated only on such a node: a claim allocated elsewhere would pin the Pod where it cannot
//! run. Free CPU, memory and Pod count are `node_fit`'s; what needs other Pods (inter-Pod
//! affinity and anti-affinity, topology spread) is left to the scheduler.

use dra_allocator::tolerates_taint;
use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, NodeSelectorTerm, NodeSpec, NodeStatus, Taint, Toleration,
};
use kube::core::ObjectMeta;

use crate::lean_pod::{LeanPod, Placement};

/// The taint the scheduler treats a cordoned node as having.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Keeps of a Node what `pod_may_run_on` reads: its name, labels, taints and whether it is
/// cordoned, and of its allocatable what `node_fit` reads (CPU, memory, Pods).
pub fn lean_node(node: &mut Node) {
    let metadata = std::mem::take(&mut node.metadata);
    node.metadata = ObjectMeta {
        name: metadata.name,
        labels: metadata.labels,
        resource_version: metadata.resource_version,
        ..ObjectMeta::default()
    };
    let spec = node.spec.take().unwrap_or_default();
    node.spec = Some(NodeSpec {
        taints: spec.taints,
        unschedulable: spec.unschedulable,
        ..NodeSpec::default()
    });
    let allocatable = node.status.take().and_then(|s| s.allocatable).map(|mut all| {
        all.retain(|name, _| matches!(name.as_str(), "cpu" | "memory" | "pods"));
        all
    });
    node.status = allocatable.map(|allocatable| NodeStatus {
        allocatable: Some(allocatable),
        ..NodeStatus::default()
    });
}

/// The names of the `nodes` `pod` may run on.
pub fn nodes_for(pod: &LeanPod, nodes: &[std::sync::Arc<Node>]) -> std::collections::HashSet<String> {
    nodes
        .iter()
        .filter(|node| pod_may_run_on(pod, node))
        .filter_map(|node| node.metadata.name.clone())
        .collect()
}

/// Whether `pod` may run on `node` by its node name, selector, required affinity and tolerations.
pub fn pod_may_run_on(pod: &LeanPod, node: &Node) -> bool {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if pod.node_name.as_deref().is_some_and(|wanted| wanted != name) {
        return false;
    }
    let no_constraints = Placement::default();
    let placement = pod.placement.as_deref().unwrap_or(&no_constraints);
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selected = placement
        .node_selector
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value));
    let required = placement.required_node_affinity.as_ref();
    let affine = required.is_none_or(|r| r.node_selector_terms.iter().any(|t| term_matches(t, name, &labels)));
    let tolerations = &placement.tolerations;
    let node_spec = node.spec.as_ref();
    let taints = node_spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
    let cordon = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        effect: "NoSchedule".into(),
        ..Taint::default()
    };
    let cordoned = node_spec.and_then(|s| s.unschedulable).unwrap_or(false);
    let untolerated = taints
        .iter()
        .chain(cordoned.then_some(&cordon))
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .any(|t| !tolerations.iter().any(|toleration| tolerates(toleration, t)));
    selected && affine && !untolerated
}

/// A term matches when all of its requirements do; a term without any matches no node.
fn term_matches(term: &NodeSelectorTerm, name: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.get(&r.key).map(String::as_str)))
        && fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(name)))
}

fn requirement_matches(requirement: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = requirement.values.as_deref().unwrap_or_default();
    let number = |v: &str| v.parse::<i64>().ok();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|w| w == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|w| w == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => matches!((value.and_then(number), values.first().and_then(|w| number(w))), (Some(v), Some(w)) if v > w),
        "Lt" => matches!((value.and_then(number), values.first().and_then(|w| number(w))), (Some(v), Some(w)) if v < w),
        _ => false,
    }
}

/// The scheduler's rule, the same as for device taints.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    tolerates_taint(toleration.into(), taint.into())
}

#[cfg(test)]
#[path = "pod_nodes_tests.rs"]
mod tests;
