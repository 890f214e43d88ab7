//! Which Pods to preempt so a gated Pod fits: the kube-scheduler's DefaultPreemption adapted to
//! devices. Pure: the node's holders in, the victims out; "does the Pod fit if these claims gave
//! their devices back" is asked of the engine through `fits` (`Allocator::fits_if_released`).
//!
//! Upstream's rules (k8s.io/kubernetes v1.34, `pkg/scheduler/framework/plugins/defaultpreemption`
//! `SelectVictimsOnNode`, and `pkg/scheduler/framework/preemption` `pickOneNodeForPreemption`):
//! - only Pods of lower priority than the preemptor are potential victims (`isPreemptionAllowed`);
//! - all of them are removed; if the Pod does not fit even then, the node is no candidate;
//! - then, from the most important (higher priority, then earlier start: `MoreImportantPod`),
//!   each is given back its place if the Pod still fits without removing it ("reprieve"); the
//!   rest are the victims: few, and of low priority;
//! - among the nodes, the one whose highest victim priority is lowest, then the lowest sum of
//!   priorities, then the fewest victims, then the latest start of its most important victims.
//!
//! Adapted to devices: a claim gives its devices back only once every Pod reserving it is a
//! victim (kube-controller-manager deallocates a claim when its `reservedFor` empties). A Pod the
//! Eviction API refused (a PodDisruptionBudget, HTTP 429) is not evictable and is never chosen,
//! where upstream prefers not to but may: our evictions go through the budget, so choosing it
//! would only wait. Upstream's first rule among nodes (fewest PDB violations) has nothing to count.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashSet};

use k8s_openapi::jiff::Timestamp;

/// A Pod that reserves claims holding devices on the node.
#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    pub priority: i32,
    /// When it started (`status.startTime`): of equal priority, the Pod running longer is the
    /// more important.
    pub started: Option<Timestamp>,
    /// False once the Eviction API refused it (a PodDisruptionBudget): never a victim then.
    pub evictable: bool,
}

/// An allocated claim on the node and who reserves it (`status.reservedFor`: Pod uids, or the
/// uids of other consumers, which are never victims).
#[derive(Clone, Debug)]
pub struct HeldClaim {
    pub id: String,
    pub reservers: Vec<String>,
}

/// What holds devices on one node.
#[derive(Clone, Debug, Default)]
pub struct NodeHolders {
    pub node: String,
    pub holders: Vec<Holder>,
    pub claims: Vec<HeldClaim>,
}

/// The victims chosen on one node, most important first.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub node: String,
    pub victims: Vec<Holder>,
}

impl NodeHolders {
    /// The ids of the claims `candidate`'s victims free on this node.
    pub fn released_by(&self, candidate: &Candidate) -> BTreeSet<String> {
        let victims: HashSet<&str> = candidate.victims.iter().map(|v| v.uid.as_str()).collect();
        self.released(&victims).into_iter().map(str::to_owned).collect()
    }

    /// The ids of the claims that give their devices back once the Pods `victims` (uids) are gone.
    fn released(&self, victims: &HashSet<&str>) -> Vec<&str> {
        self.claims
            .iter()
            .filter(|c| !c.reservers.is_empty() && c.reservers.iter().all(|r| victims.contains(r.as_str())))
            .map(|c| c.id.as_str())
            .collect()
    }
}

/// Higher priority first, then the one started earlier (upstream's `MoreImportantPod`; a Pod
/// without a start time counts as started now).
fn importance(holder: &Holder) -> (Reverse<i32>, Timestamp) {
    (Reverse(holder.priority), holder.started.unwrap_or_else(Timestamp::now))
}

/// The fewest and least important Pods on `node` whose going makes the Pod of `priority` fit, or
/// `None` when even every Pod of lower priority going would not.
pub fn victims_on_node<E>(
    priority: i32,
    node: &NodeHolders,
    fits: &mut dyn FnMut(&[&str]) -> Result<bool, E>,
) -> Result<Option<Candidate>, E> {
    let mut potential: Vec<&Holder> = node
        .holders
        .iter()
        .filter(|h| h.priority < priority && h.evictable)
        .collect();
    let mut victims: HashSet<&str> = potential.iter().map(|h| h.uid.as_str()).collect();
    let released = node.released(&victims);
    if released.is_empty() || !fits(&released)? {
        return Ok(None);
    }
    potential.sort_by_key(|h| importance(h));
    let mut chosen = vec![];
    for holder in potential {
        victims.remove(holder.uid.as_str());
        let released = node.released(&victims);
        if !fits(&released)? {
            victims.insert(holder.uid.as_str());
            chosen.push(holder.clone());
        }
    }
    // Pods whose going freed nothing the Pod needed were all reprieved; what is left is needed.
    Ok(Some(Candidate {
        node: node.node.clone(),
        victims: chosen,
    }))
}

/// Upstream's order among candidate nodes, best first: lowest highest-victim priority, lowest sum
/// of priorities (shifted so negative priorities count as less, as upstream does), fewest
/// victims, latest start among the most important victims, then node name.
fn rank(candidate: &Candidate) -> (i32, i64, usize, Reverse<Timestamp>, String) {
    let highest = candidate.victims.first().map_or(i32::MIN, |v| v.priority);
    let sum: i64 = candidate
        .victims
        .iter()
        .map(|v| i64::from(v.priority) + i64::from(i32::MAX) + 1)
        .sum();
    let earliest_of_highest = candidate
        .victims
        .iter()
        .filter(|v| v.priority == highest)
        .filter_map(|v| v.started)
        .min()
        .unwrap_or(Timestamp::MAX);
    (
        highest,
        sum,
        candidate.victims.len(),
        Reverse(earliest_of_highest),
        candidate.node.clone(),
    )
}

/// "Does the Pod fit on this node once these claims (ids) gave their devices back?"
pub type NodeFits<'a, E> = dyn FnMut(&str, &[&str]) -> Result<bool, E> + 'a;

/// How many candidate nodes are weighed before the best of them is chosen: 10% of the nodes, at
/// least 100 (upstream's `calculateNumCandidates` with the defaults `minCandidateNodesPercentage`
/// 10 and `minCandidateNodesAbsolute` 100). At 1,000 nodes each weighed node costs the engine a
/// search per potential victim; enough candidates are as good a choice as all of them.
pub fn enough_candidates(nodes: usize) -> usize {
    (nodes / 10).max(100).min(nodes)
}

/// The best node to preempt on, and its victims, among `nodes`; `None` when no node has lower
/// priority Pods whose going makes the Pod fit. `fits(node, released)` asks the engine. The search
/// stops once [`enough_candidates`] nodes are candidates.
pub fn choose_victims<E>(
    priority: i32,
    nodes: &[NodeHolders],
    fits: &mut NodeFits<'_, E>,
) -> Result<Option<Candidate>, E> {
    let enough = enough_candidates(nodes.len());
    let mut candidates = vec![];
    for node in nodes {
        if candidates.len() >= enough {
            break;
        }
        let mut on_node = |released: &[&str]| fits(&node.node, released);
        if let Some(candidate) = victims_on_node(priority, node, &mut on_node)? {
            candidates.push(candidate);
        }
    }
    Ok(candidates.into_iter().min_by_key(rank))
}

#[cfg(test)]
#[path = "preemption_search_tests.rs"]
mod tests;
