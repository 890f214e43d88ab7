//! The room a round sees on each node for a gated Pod's CPU, memory and Pod count (see
//! `node_fit`): what the bound Pods take, plus the Pods this controller pinned to a node and the
//! scheduler has not bound yet. A pinned Pod counts from the round that allocated its claims until
//! the Pod store shows it bound (then it counts as bound) or gone, so two Pods allocated in one
//! round, or in rounds before the first is bound, do not both take the last room of a node.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Node;

use crate::lean_pod::LeanPod;
use crate::node_fit::{Requests, Taken, fits, taken_by_bound_pods};
use crate::pod_nodes::pod_may_run_on;

/// Pods whose claims this controller allocated on a node, by uid: the node and the requests.
#[derive(Default)]
pub struct PinnedPods(HashMap<String, (String, Requests)>);

pub struct NodeRoom {
    taken: HashMap<String, Taken>,
}

impl NodeRoom {
    /// The room left by `pods` (the round's lean Pods) and the Pods still `pinned` but not bound;
    /// forgets pinned Pods that are bound, terminated or gone.
    pub fn of(pods: &[Arc<LeanPod>], pinned: &mut PinnedPods) -> NodeRoom {
        let mut taken = taken_by_bound_pods(pods);
        let waiting: HashSet<&str> = pods
            .iter()
            .filter(|p| p.node_name.is_none() && !p.terminated)
            .filter_map(|p| p.metadata.uid.as_deref())
            .collect();
        pinned.0.retain(|uid, _| waiting.contains(uid.as_str()));
        for (node, requests) in pinned.0.values() {
            taken.entry(node.clone()).or_default().count(*requests);
        }
        NodeRoom { taken }
    }

    /// The names of the `nodes` `pod` may run on: its node constraints allow it and its requests
    /// fit what is left.
    pub fn nodes_for(&self, pod: &LeanPod, nodes: &[Arc<Node>]) -> HashSet<String> {
        let requests = pod.requests;
        nodes
            .iter()
            .filter(|node| pod_may_run_on(pod, node))
            .filter(|node| {
                let name = node.metadata.name.as_deref().unwrap_or_default();
                fits(requests, node, self.taken.get(name).copied().unwrap_or_default())
            })
            .filter_map(|node| node.metadata.name.clone())
            .collect()
    }

    /// Counts `pod` on `node` from now on: its claims were allocated there.
    pub fn pin(&mut self, pod: &LeanPod, node: &str, pinned: &mut PinnedPods) {
        let requests = pod.requests;
        self.taken.entry(node.to_owned()).or_default().count(requests);
        if let Some(uid) = pod.metadata.uid.as_deref() {
            pinned.0.insert(uid.to_owned(), (node.to_owned(), requests));
        }
    }
}
