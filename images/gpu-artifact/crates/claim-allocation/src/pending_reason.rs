//! The text of a Pending claim's Event: why it fits nowhere, node by node, from the engine's own
//! explanation (so the reason is the one that decided), completed with what the engine cannot
//! see: nodes whose MIG offers are off by their `gpu.deckhouse.io/allow-mig=false` label, and
//! nodes whose GPUs are not DriverReady (they publish no devices, so the engine does not know them).
//! Pure: explanation and facts in, text out.

use std::collections::{BTreeMap, BTreeSet};

use dra_allocator::{AllocationError, Explanation, NodeExplanation, RequestProblem};
pub use dra_offers::ALLOW_MIG_LABEL;

use crate::engine_thread::EnginePanic;

/// An Event's note holds at most this many bytes (events.k8s.io/v1).
const NOTE_MAX_BYTES: usize = 1024;

/// Nodes named for GPUs that are not DriverReady, at most.
const NOT_READY_NODES_NAMED: usize = 3;

/// What the controller knows of nodes beyond the engine.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NodeFacts {
    /// Nodes labelled `gpu.deckhouse.io/allow-mig=false`.
    pub mig_off: BTreeSet<String>,
    /// Per node, its PhysicalGPUs whose DriverReady condition is False.
    pub driver_not_ready: BTreeMap<String, Vec<String>>,
}

/// Why the engine gave a claim no allocation.
#[derive(Debug)]
pub enum Unallocated {
    /// It fits nowhere now, explained node by node.
    NoFit(Explanation),
    /// A class or claim cannot be used at all (a CEL error, an unknown class, an invalid claim).
    Invalid(AllocationError),
    /// The engine panicked while allocating it.
    Panicked(EnginePanic),
    /// It would fit, but not on any of the (this many) nodes its Pod may run on.
    NotWherePodRuns(usize),
}

/// The Event note for a claim that cannot be allocated. `mig_classes` are the classes that select
/// MIG devices.
pub fn pending_reason(why: &Unallocated, facts: &NodeFacts, mig_classes: &BTreeSet<String>) -> String {
    let text = match why {
        Unallocated::Invalid(error) => format!("cannot allocate: {error}"),
        Unallocated::Panicked(panic) => format!("cannot allocate: {panic}; this claim is skipped until it changes"),
        Unallocated::NoFit(explanation) => no_fit(explanation, facts, mig_classes),
        Unallocated::NotWherePodRuns(nodes) => format!(
            "cannot allocate: it fits only on nodes its Pod may not run on; none of the {nodes} nodes the Pod's \
             nodeName, nodeSelector, required node affinity and tolerations admit has a fit"
        ),
    };
    truncated(text)
}

fn no_fit(explanation: &Explanation, facts: &NodeFacts, mig_classes: &BTreeSet<String>) -> String {
    let mut parts = vec![];
    // With no matching device anywhere, the nodes' "no device of the class" says it.
    if let Some((request, count, most)) = explanation.count_beyond_every_node.as_ref().filter(|c| c.2 > 0) {
        parts.push(format!(
            "request {request} asks for {count} devices, more than any node can give (at most {most} match on one node)"
        ));
    }
    for node in &explanation.nodes {
        parts.push(node_text(node, facts, mig_classes));
    }
    let explained: BTreeSet<&str> = explanation.nodes.iter().map(|n| n.node.as_str()).collect();
    let not_ready = facts
        .driver_not_ready
        .iter()
        .filter(|(node, _)| !explained.contains(node.as_str()))
        .take(NOT_READY_NODES_NAMED);
    for (node, gpus) in not_ready {
        parts.push(format!(
            "node {node}: offers no devices, its GPUs are not DriverReady ({})",
            gpus.join(", ")
        ));
    }
    if parts.is_empty() {
        parts.push("no node offers devices of the gpu.deckhouse.io driver".to_owned());
    }
    format!("cannot allocate: {}", parts.join("; "))
}

fn node_text(node: &NodeExplanation, facts: &NodeFacts, mig_classes: &BTreeSet<String>) -> String {
    let mut problems: Vec<String> = node
        .problems
        .iter()
        .map(|problem| match problem {
            RequestProblem::NoDevice { class, .. }
                if mig_classes.contains(class) && facts.mig_off.contains(&node.node) =>
            {
                format!("{problem} (MIG is off on this node: {ALLOW_MIG_LABEL}=false)")
            }
            _ => problem.to_string(),
        })
        .collect();
    if problems.is_empty() {
        problems.push("each request fits alone, but not all together".to_owned());
    }
    let mut text = format!("node {}: {}", node.node, problems.join(", "));
    if let Some(gpus) = facts.driver_not_ready.get(&node.node) {
        text.push_str(&format!(" (GPUs not DriverReady: {})", gpus.join(", ")));
    }
    text
}

/// `text` cut to fit an Event's note.
pub fn truncated(mut text: String) -> String {
    if text.len() > NOTE_MAX_BYTES {
        let mut end = NOTE_MAX_BYTES - 3;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// The classes whose selectors pick MIG devices (`deviceType == "MIG"`).
pub fn mig_classes<'c>(
    classes: impl IntoIterator<Item = &'c k8s_openapi::api::resource::v1::DeviceClass>,
) -> BTreeSet<String> {
    classes
        .into_iter()
        .filter(|class| {
            class.spec.selectors.iter().flatten().any(|s| {
                s.cel
                    .as_ref()
                    .is_some_and(|cel| cel.expression.replace(' ', "").contains("deviceType==\"MIG\""))
            })
        })
        .filter_map(|class| class.metadata.name.clone())
        .collect()
}

#[cfg(test)]
#[path = "pending_reason_tests.rs"]
mod tests;
