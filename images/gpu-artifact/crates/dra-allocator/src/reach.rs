//! Which devices each node reaches, kept per node in best-fit order and updated only for the nodes
//! a pool change touches: its node-local devices, devices available everywhere, and devices bound
//! by a node selector that the node's name alone proves it matches. Each node has a version that
//! moves whenever what it reaches, or the use of it, changes: a search result for a node stays
//! valid while its version (and the global one, for devices outside any node) stays.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelector};

use crate::best_fit::fit_order;
use crate::inventory::{Inventory, PoolKey};
use crate::node_selection::{NodeBinding, selector_reaches};
use crate::scope::Scope;

pub(crate) struct NodeReach {
    pub name: Arc<str>,
    pools: BTreeSet<u32>,
    /// Every device the node reaches (by its name alone), best fit first.
    pub sorted: Vec<u32>,
    pub version: u64,
}

#[derive(Default)]
pub(crate) struct Reach {
    pub nodes: Vec<Option<NodeReach>>,
    free: Vec<u32>,
    /// Nodes with node-local devices, by name.
    pub node_ids: BTreeMap<Arc<str>, u32>,
    pub all_nodes: Vec<u32>,
    /// Distinct node selectors, in pool order, with their devices.
    pub selectors: Vec<(NodeSelector, Vec<u32>)>,
    pool_nodes: HashMap<u32, Vec<Arc<str>>>,
    /// Pools with devices bound to all nodes or by a selector.
    global_pools: BTreeMap<PoolKey, u32>,
    pub global_version: u64,
    next_version: u64,
    /// Nodes in name order (shared with searches running over them).
    pub ordered: Arc<Vec<(Arc<str>, u32)>>,
    /// Every node whose version moved, in order; `log_start` is the position of its first entry
    /// (older entries are dropped).
    pub changes: Vec<u32>,
    pub log_start: u64,
}

/// Node changes remembered; a search memo older than that starts over.
const MAX_CHANGES: usize = 1 << 16;

impl Reach {
    fn version(&mut self) -> u64 {
        self.next_version += 1;
        self.next_version
    }

    fn changed(&mut self, node: u32) {
        if self.changes.len() >= MAX_CHANGES {
            let drop = MAX_CHANGES / 2;
            self.changes.drain(..drop);
            self.log_start += drop as u64;
        }
        self.changes.push(node);
    }

    /// Position just past the last change.
    pub(crate) fn log_end(&self) -> u64 {
        self.log_start + self.changes.len() as u64
    }

    /// Nodes changed since position `since`, or `None` if that is no longer remembered.
    pub(crate) fn changed_since(&self, since: u64) -> Option<&[u32]> {
        let at = since.checked_sub(self.log_start)?;
        self.changes.get(at as usize..)
    }

    /// Follows a change of `pools` (some may be gone or unusable now).
    pub(crate) fn update_pools(&mut self, inventory: &Inventory, pools: &[u32]) {
        let mut touched: BTreeSet<Arc<str>> = BTreeSet::new();
        let mut global_changed = false;
        for &id in pools {
            for node in self.pool_nodes.remove(&id).unwrap_or_default() {
                if let Some(reach) = self.node_ids.get(&node).and_then(|n| self.nodes[*n as usize].as_mut()) {
                    reach.pools.remove(&id);
                }
                touched.insert(node);
            }
            global_changed |= self.global_pools.values().any(|p| *p == id);
            self.global_pools.retain(|_, p| *p != id);
            let Some(pool) = inventory.pools.get(id as usize).and_then(Option::as_ref) else {
                continue;
            };
            let mut nodes: Vec<Arc<str>> = Vec::new();
            let mut global = false;
            for &slot in &pool.by_name {
                match inventory.binding_of(slot) {
                    Some(NodeBinding::Node(name)) => {
                        if !nodes.iter().any(|n| **n == **name) {
                            nodes.push(Arc::from(name.as_str()));
                        }
                    }
                    _ => global = true,
                }
            }
            if global {
                self.global_pools.insert((pool.driver.clone(), pool.name.clone()), id);
                global_changed = true;
            }
            for node in &nodes {
                let n = self.node(node);
                self.nodes[n as usize].as_mut().expect("node").pools.insert(id);
                touched.insert(node.clone());
            }
            self.pool_nodes.insert(id, nodes);
        }
        if global_changed {
            self.rebuild_global(inventory);
            touched.extend(self.node_ids.keys().cloned());
        }
        for name in touched {
            let Some(&n) = self.node_ids.get(&name) else { continue };
            if self.nodes[n as usize].as_ref().is_some_and(|r| r.pools.is_empty()) {
                self.nodes[n as usize] = None;
                self.node_ids.remove(&name);
                self.free.push(n);
                self.changed(n);
                continue;
            }
            let sorted = self.sorted_for(inventory, &name, None);
            let version = self.version();
            let reach = self.nodes[n as usize].as_mut().expect("node");
            reach.sorted = sorted;
            reach.version = version;
            self.changed(n);
        }
        let ordered: Vec<(Arc<str>, u32)> = self.node_ids.iter().map(|(n, id)| (n.clone(), *id)).collect();
        if *ordered != **self.ordered {
            self.ordered = Arc::new(ordered);
        }
    }

    fn node(&mut self, name: &Arc<str>) -> u32 {
        if let Some(n) = self.node_ids.get(name) {
            return *n;
        }
        let reach = NodeReach {
            name: name.clone(),
            pools: BTreeSet::new(),
            sorted: Vec::new(),
            version: 0,
        };
        let n = match self.free.pop() {
            Some(n) => {
                self.nodes[n as usize] = Some(reach);
                n
            }
            None => {
                self.nodes.push(Some(reach));
                (self.nodes.len() - 1) as u32
            }
        };
        self.node_ids.insert(name.clone(), n);
        n
    }

    fn rebuild_global(&mut self, inventory: &Inventory) {
        self.all_nodes.clear();
        self.selectors.clear();
        for id in self.global_pools.values() {
            for &slot in &inventory.pool(*id).by_name {
                match inventory.binding_of(slot) {
                    Some(NodeBinding::AllNodes) => self.all_nodes.push(slot),
                    Some(NodeBinding::Selector(selector)) => {
                        match self.selectors.iter_mut().find(|(s, _)| s == selector) {
                            Some((_, devices)) => devices.push(slot),
                            None => self.selectors.push((selector.clone(), vec![slot])),
                        }
                    }
                    _ => {}
                }
            }
        }
        self.global_version = self.version();
    }

    /// The devices a node reaches, best fit first: by its name alone, or with its labels.
    pub(crate) fn sorted_for(&self, inventory: &Inventory, name: &str, node: Option<&Node>) -> Vec<u32> {
        let mut devices = Vec::new();
        if let Some(reach) = self.node_ids.get(name).and_then(|n| self.nodes[*n as usize].as_ref()) {
            for pool in &reach.pools {
                devices.extend(
                    inventory
                        .pool(*pool)
                        .by_name
                        .iter()
                        .copied()
                        .filter(|slot| matches!(inventory.binding_of(*slot), Some(NodeBinding::Node(n)) if n == name)),
                );
            }
        }
        for (selector, members) in &self.selectors {
            if selector_reaches(selector, name, node) {
                devices.extend(members);
            }
        }
        devices.extend(&self.all_nodes);
        fit_order(inventory, &mut devices);
        devices
    }

    /// Marks the nodes that reach `slot` as changed (its use changed).
    pub(crate) fn touch(&mut self, inventory: &Inventory, slot: u32) {
        let version = self.version();
        match inventory.binding_of(slot) {
            Some(NodeBinding::Node(name)) => {
                let Some(&n) = self.node_ids.get(name.as_str()) else {
                    return;
                };
                if let Some(reach) = self.nodes[n as usize].as_mut() {
                    reach.version = version;
                }
                self.changed(n);
            }
            _ => self.global_version = version,
        }
    }

    /// The devices a search in `scope` may take, best fit first.
    pub(crate) fn scope_devices(&self, inventory: &Inventory, scope: Scope<'_>) -> Cow<'_, [u32]> {
        match scope {
            Scope::Node { name, node } => {
                let labels_matter = node.is_some_and(|n| n.metadata.labels.is_some()) && !self.selectors.is_empty();
                match self.node_reach(name) {
                    Some(reach) if !labels_matter => Cow::Borrowed(&reach.sorted),
                    _ => Cow::Owned(self.sorted_for(inventory, name, node)),
                }
            }
            Scope::Selector(i) => {
                let mut devices = self.selectors[i].1.clone();
                devices.extend(&self.all_nodes);
                fit_order(inventory, &mut devices);
                Cow::Owned(devices)
            }
            Scope::Everywhere => {
                let mut devices = self.all_nodes.clone();
                fit_order(inventory, &mut devices);
                Cow::Owned(devices)
            }
        }
    }

    pub(crate) fn node_reach(&self, name: &str) -> Option<&NodeReach> {
        self.node_ids.get(name).and_then(|n| self.nodes[*n as usize].as_ref())
    }
}
