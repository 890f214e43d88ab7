//! Where one search for a claim may take devices from, as the scheduler's one node per attempt:
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

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Node, NodeSelector};

use crate::inventory::Inventory;
use crate::node_selection::{NodeBinding, selector_reaches};

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

impl Scope<'_> {
    /// The node the search is held to, if any.
    pub(crate) fn node_name(&self) -> Option<&str> {
        match self {
            Scope::Node { name, .. } => Some(name),
            _ => None,
        }
    }

    /// A key for per-scope caches: scopes with equal keys reach the same devices.
    pub(crate) fn key(&self) -> String {
        match self {
            Scope::Node { name, node: None } => format!("node {name}"),
            Scope::Node { name, node: Some(node) } => format!("node {name} {:?}", node.metadata.labels),
            Scope::Selector(i) => format!("selector {i}"),
            Scope::Everywhere => "everywhere".to_owned(),
        }
    }
}

/// The inventory's devices grouped by how they are bound to nodes.
#[derive(Default)]
pub(crate) struct Reach {
    pub by_node: HashMap<String, Vec<usize>>,
    pub all_nodes: Vec<usize>,
    /// Distinct node selectors, in inventory order, with their devices.
    pub selectors: Vec<(NodeSelector, Vec<usize>)>,
}

impl Reach {
    pub(crate) fn of(inventory: &Inventory) -> Reach {
        let mut reach = Reach::default();
        for (i, device) in inventory.devices.iter().enumerate() {
            match &device.binding {
                NodeBinding::Node(name) => reach.by_node.entry(name.clone()).or_default().push(i),
                NodeBinding::AllNodes => reach.all_nodes.push(i),
                NodeBinding::Selector(selector) => match reach.selectors.iter_mut().find(|(s, _)| s == selector) {
                    Some((_, devices)) => devices.push(i),
                    None => reach.selectors.push((selector.clone(), vec![i])),
                },
            }
        }
        reach
    }

    /// The names of the nodes with node-local devices, sorted.
    pub(crate) fn node_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.by_node.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// The devices a search in `scope` may take, in inventory order.
    pub(crate) fn devices(&self, scope: Scope<'_>) -> Vec<usize> {
        let mut devices = match scope {
            Scope::Node { name, node } => {
                let mut devices: Vec<usize> = self.by_node.get(name).cloned().unwrap_or_default();
                for (selector, members) in &self.selectors {
                    if selector_reaches(selector, name, node) {
                        devices.extend(members);
                    }
                }
                devices
            }
            Scope::Selector(i) => self.selectors[i].1.clone(),
            Scope::Everywhere => Vec::new(),
        };
        devices.extend(&self.all_nodes);
        devices.sort_unstable();
        devices
    }
}

/// The scopes a claim allocated without a node is tried in: every node by name (`nodes`), then
/// each of the `selectors` node selectors; `Everywhere` when there are neither.
pub(crate) fn scopes_without_node(nodes: &[String], selectors: usize) -> Vec<Scope<'_>> {
    let mut scopes: Vec<Scope<'_>> = nodes.iter().map(|name| Scope::Node { name, node: None }).collect();
    scopes.extend((0..selectors).map(Scope::Selector));
    if scopes.is_empty() {
        scopes.push(Scope::Everywhere);
    }
    scopes
}
