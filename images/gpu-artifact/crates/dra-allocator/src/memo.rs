//! Best fit across the cluster without searching every node for every claim. Per claim shape
//! (what the search reads of a claim: its requests and constraints, not its name or configs), the
//! outcome on each node is kept with the node's version, and the nodes where it fits are ranked
//! by score, then name. A new claim of a known shape searches again only the nodes that changed
//! since the shape was last used (usually the one the last claim went to, found from the change
//! log of `reach`), and the best is the first of the ranking. A shape new, evicted, or older
//! than the change log starts with a search of every node.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::best_fit::FitScore;
use crate::search::Pick;

/// Shapes whose results are kept; the least recently used goes first.
const MAX_SHAPES: usize = 16;

#[derive(Clone)]
pub(crate) enum Outcome {
    Found(Vec<Pick>, FitScore),
    /// Why not (without the claim's name).
    NotFound(Arc<str>),
}

struct Entry {
    name: Arc<str>,
    version: u64,
    outcome: Outcome,
}

/// What is known of one shape.
pub(crate) struct ShapeMemo {
    /// By node id (the ids of `reach`: dense, reused), so no hash table around them.
    entries: Vec<Option<Entry>>,
    /// (score, node name, node id) of the nodes where the shape fits.
    ranking: BTreeSet<(FitScore, Arc<str>, u32)>,
    /// The change log position and global version the memo is valid at.
    pub(crate) seen: Option<(u64, u64)>,
    last_used: u64,
}

impl ShapeMemo {
    /// The remembered outcome on `node` at `version`, if any.
    pub(crate) fn get(&self, node: u32, version: u64) -> Option<&Outcome> {
        self.entries
            .get(node as usize)?
            .as_ref()
            .filter(|e| e.version == version)
            .map(|e| &e.outcome)
    }

    /// Records `outcome` for `node` (replacing what was known), or forgets the node (`None`).
    pub(crate) fn put(&mut self, node: u32, name: &Arc<str>, version: u64, outcome: Outcome) {
        self.forget(node);
        if let Outcome::Found(_, score) = &outcome {
            self.ranking.insert((*score, name.clone(), node));
        }
        let name = name.clone();
        let at = node as usize;
        if self.entries.len() <= at {
            self.entries.resize_with(at + 1, || None);
        }
        self.entries[at] = Some(Entry { name, version, outcome });
    }

    /// Forgets what is known of a node (it changed, or is gone).
    pub(crate) fn forget(&mut self, node: u32) {
        if let Some(old) = self.entries.get_mut(node as usize).and_then(Option::take)
            && let Outcome::Found(_, score) = old.outcome
        {
            self.ranking.remove(&(score, old.name, node));
        }
    }

    /// The best node `allowed` admits (any without it): lowest score, then name.
    pub(crate) fn best_where(
        &self,
        allowed: Option<&dyn Fn(&str) -> bool>,
    ) -> Option<(&FitScore, &Arc<str>, &Outcome)> {
        let (score, name, node) = self
            .ranking
            .iter()
            .find(|(_, name, _)| allowed.is_none_or(|allowed| allowed(name)))?;
        let entry = self.entries[*node as usize]
            .as_ref()
            .expect("a ranked node has an entry");
        Some((score, name, &entry.outcome))
    }

    /// The reason the first of `nodes` (in their order) gave for not fitting.
    pub(crate) fn first_reason(&self, nodes: &[(Arc<str>, u32)]) -> Option<Arc<str>> {
        nodes
            .iter()
            .find_map(|(_, id)| match &self.entries.get(*id as usize)?.as_ref()?.outcome {
                Outcome::NotFound(why) => Some(why.clone()),
                Outcome::Found(..) => None,
            })
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.ranking.clear();
        self.seen = None;
    }
}

#[derive(Default)]
pub(crate) struct Memo {
    shapes: HashMap<String, ShapeMemo>,
    tick: u64,
}

impl Memo {
    /// Takes out the memo of `claim`'s shape (a new one may push the oldest shape out); give it
    /// back with `put_back`.
    pub(crate) fn take(&mut self, claim: &ResourceClaim) -> (String, ShapeMemo) {
        let key = claim
            .spec
            .devices
            .as_ref()
            .map(|d| serde_json::to_string(&(&d.requests, &d.constraints)).unwrap_or_default())
            .unwrap_or_default();
        self.tick += 1;
        if !self.shapes.contains_key(&key) && self.shapes.len() >= MAX_SHAPES {
            let oldest = self
                .shapes
                .iter()
                .min_by_key(|(_, m)| m.last_used)
                .map(|(k, _)| k.clone())
                .expect("not empty");
            self.shapes.remove(&oldest);
        }
        let mut memo = self.shapes.remove(&key).unwrap_or_else(|| ShapeMemo {
            entries: Vec::new(),
            ranking: BTreeSet::new(),
            seen: None,
            last_used: 0,
        });
        memo.last_used = self.tick;
        (key, memo)
    }

    pub(crate) fn put_back(&mut self, key: String, memo: ShapeMemo) {
        self.shapes.insert(key, memo);
    }

    pub(crate) fn clear(&mut self) {
        self.shapes.clear();
    }
}
