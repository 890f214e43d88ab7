//! Where one search for a claim may take devices from, as the scheduler's one node per attempt
//! (the devices themselves: `reach`):
//! a node (its node-local devices, devices available everywhere, and selector-bound devices that
//! reach it), or, for a standalone claim allocated without a node, the devices of one node
//! selector together with those available everywhere. The allocation's node selector then says
//! where Pods using the claim may run (see `node_selection::allocation_node_selector`).
//!
//! Without a Node object (or with one without labels), labels are unknown: a selector-bound
//! device joins a node's scope only when the node's name alone proves the selector matches it
//! (`metadata.name` fields), so a claim never mixes node-local devices with devices the node may
//! not reach. Devices of two different selectors meet only in the scope of a node proven to match
//! both.

use k8s_openapi::api::core::v1::Node;

/// One search's reach.
#[derive(Clone, Copy)]
pub(crate) enum Scope<'n> {
    /// One node, by name, with its object when the caller has it (then labels count too).
    Node { name: &'n str, node: Option<&'n Node> },
    /// Devices of the `i`-th distinct node selector, and those available everywhere.
    Selector(usize),
    /// Only devices available everywhere (the inventory has no node-local or selector devices).
    Everywhere,
}
