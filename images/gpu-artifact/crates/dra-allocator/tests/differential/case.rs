//! One differential case: the inventory as units (a node with its slices, or a node-selector pool
//! without a node of its own), claims already allocated before the stream, and the stream of
//! claims ours allocates one after the other, committing each result. Everything is JSON as the
//! API server would hand it out, so a case can be written to a file and replayed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::shrink::{Part, Shrinkable};

/// A node (with its Node object) and its slices, or a pool reached through a node selector.
#[derive(Clone)]
pub struct Unit {
    pub node: Option<Value>,
    pub slices: Vec<Value>,
}

#[derive(Clone)]
pub struct Case {
    pub version: &'static str,
    pub seed: u64,
    pub units: Vec<Unit>,
    pub allocated: Vec<Value>,
    pub claims: Vec<Value>,
    /// Admin DeviceTaintRules, in the version the release serves (`taint_rules`).
    pub taint_rules: Vec<Value>,
}

/// (driver, pool) of a slice.
pub fn pool_of(slice: &Value) -> (String, String) {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (text(&slice["spec"]["driver"]), text(&slice["spec"]["pool"]["name"]))
}

impl Case {
    pub fn slices(&self) -> Vec<Value> {
        self.units.iter().flat_map(|u| u.slices.iter().cloned()).collect()
    }

    pub fn nodes(&self) -> Vec<Value> {
        self.units.iter().filter_map(|u| u.node.clone()).collect()
    }

    pub fn node(&self, name: &str) -> Option<Value> {
        self.units
            .iter()
            .filter_map(|u| u.node.as_ref())
            .find(|n| n["metadata"]["name"] == name)
            .cloned()
    }

    /// Pools that repeat a device name across their slices (`poolIsInvalid`), judged here from
    /// the JSON rather than by the engine under test.
    pub fn invalid_pools(&self) -> BTreeSet<(String, String)> {
        let mut names: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
        let mut invalid = BTreeSet::new();
        for slice in self.units.iter().flat_map(|u| &u.slices) {
            let pool = pool_of(slice);
            for device in slice["spec"]["devices"].as_array().into_iter().flatten() {
                let name = device["name"].as_str().unwrap_or_default().to_owned();
                if !names.entry(pool.clone()).or_default().insert(name) {
                    invalid.insert(pool.clone());
                }
            }
        }
        invalid
    }

    /// Pools bound by a node selector with label expressions: ours cannot tell, without the Node
    /// objects, which node-local devices they may join.
    pub fn label_selector_pools(&self) -> BTreeSet<(String, String)> {
        self.units
            .iter()
            .flat_map(|u| &u.slices)
            .filter(|s| s["spec"]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"].is_array())
            .map(pool_of)
            .collect()
    }

    pub fn has_selector_pool(&self) -> bool {
        self.units.iter().any(|u| u.node.is_none())
    }

    /// The case as one JSON document, with what went wrong.
    pub fn report(&self, failure: &str, classes: &[Value]) -> Value {
        json!({"version": self.version, "seed": self.seed, "failure": failure,
            "nodes": self.nodes(), "slices": self.slices(), "classes": classes,
            "allocated": self.allocated, "claims": self.claims, "taintRules": self.taint_rules})
    }
}

impl Shrinkable for Case {
    fn count(&self, part: Part) -> usize {
        match part {
            Part::Claim => self.claims.len(),
            Part::Node => self.units.len(),
            Part::Allocated => self.allocated.len(),
        }
    }

    fn without(&self, part: Part, index: usize) -> Self {
        let mut next = self.clone();
        match part {
            Part::Claim => {
                next.claims.remove(index);
            }
            Part::Node => {
                next.units.remove(index);
            }
            Part::Allocated => {
                next.allocated.remove(index);
            }
        }
        next
    }
}
