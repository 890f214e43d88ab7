//! Search results per claim shape and node, for allocating without a node (best fit across the
//! cluster): a search on a node gives the same answer while nothing the node reaches changed (its
//! version, see `reach`) and the classes are the same, so a new claim shaped like earlier ones
//! searches only the nodes that changed since (usually one: where the last claim went) instead of
//! every node. A shape is what the search reads of a claim: its requests and constraints (not its
//! name or configs).

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::best_fit::FitScore;
use crate::search::Pick;

/// Shapes whose results are kept; the least recently used goes first.
const MAX_SHAPES: usize = 32;

#[derive(Clone)]
pub(crate) enum Outcome {
    Found(Vec<Pick>, FitScore),
    /// Why not (without the claim's name).
    NotFound(Arc<str>),
}

struct Entry {
    versions: (u64, u64),
    outcome: Outcome,
}

#[derive(Default)]
pub(crate) struct Memo {
    shapes: HashMap<String, (u32, u64)>,
    entries: HashMap<(u32, u32), Entry>,
    next_shape: u32,
    tick: u64,
}

impl Memo {
    /// The id of `claim`'s shape (a new one may push the oldest shape out).
    pub(crate) fn shape(&mut self, claim: &ResourceClaim) -> u32 {
        let key = claim
            .spec
            .devices
            .as_ref()
            .map(|d| {
                serde_json::json!({"requests": d.requests, "constraints": d.constraints}).to_string()
            })
            .unwrap_or_default();
        self.tick += 1;
        let tick = self.tick;
        if let Some((id, used)) = self.shapes.get_mut(&key) {
            *used = tick;
            return *id;
        }
        if self.shapes.len() >= MAX_SHAPES {
            let (oldest, id) = self
                .shapes
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, (id, _))| (k.clone(), *id))
                .expect("not empty");
            self.shapes.remove(&oldest);
            self.entries.retain(|(shape, _), _| *shape != id);
        }
        self.next_shape += 1;
        self.shapes.insert(key, (self.next_shape, tick));
        self.next_shape
    }

    /// The remembered outcome on `node`, if the node's versions are still those it was found at.
    pub(crate) fn get(&self, shape: u32, node: u32, versions: (u64, u64)) -> Option<&Outcome> {
        self.entries
            .get(&(shape, node))
            .filter(|e| e.versions == versions)
            .map(|e| &e.outcome)
    }

    pub(crate) fn put(&mut self, shape: u32, node: u32, versions: (u64, u64), outcome: Outcome) {
        self.entries.insert((shape, node), Entry { versions, outcome });
    }

    pub(crate) fn clear(&mut self) {
        self.shapes.clear();
        self.entries.clear();
    }
}
