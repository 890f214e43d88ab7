//! What preemption remembers between rounds, and how it reads the stores. Pure: no I/O.
//!
//! The hold: once a preemptor's victims are evicted it is *nominated* to their node (as the
//! kube-scheduler nominates a preemptor, `status.nominatedNodeName`). Until it leaves the gated
//! Pods (allocated, or gone), that node is withheld from every other gated Pod of equal or lower
//! priority, and gated Pods are served highest priority first: the devices the victims give back
//! can only go to the preemptor, or to a Pod that would itself have been allowed to preempt it.
//! The kube-scheduler does not see the nomination: a Pod it allocates itself (not gated by the
//! module) may take freed devices, as upstream has no way to hold devices for a nominated Pod
//! (KEP-5690).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kube::ResourceExt;

use crate::lean_pod::LeanPod;
use crate::preemption_search::Holder;
use crate::stored_claims::{AllocatedClaim, StoredClaim};

/// How long a Pod the Eviction API refused (a PodDisruptionBudget) is passed over; the API server
/// asks to retry a refused eviction after 10 seconds (`createTooManyRequestsError`).
pub const REFUSAL_MEMORY: Duration = Duration::from_secs(10);

/// A preemptor's hold on a node while its victims go.
#[derive(Clone, Debug, PartialEq)]
pub struct Nomination {
    pub node: String,
    pub priority: i32,
    /// Uids of the Pods evicted for it.
    pub victims: BTreeSet<String>,
    /// Ids of the claims whose devices come back once they are gone.
    pub claims: BTreeSet<String>,
}

#[derive(Default)]
pub struct Preemptions {
    /// The module's switch (ModuleConfig `preemption.enabled`).
    pub enabled: bool,
    /// The client evictions go through: one that does not retry HTTP 429. kube's default client
    /// retries it for as long as the API server's Retry-After says (10 s for a budget), up to 15
    /// times, which would hold the round minutes on a refusal that is an answer, not a failure.
    /// `None`: the round's client.
    pub eviction_client: Option<kube::Client>,
    nominations: HashMap<String, Nomination>,
    /// Victim uid to when the Eviction API refused it.
    refused: HashMap<String, Instant>,
}

/// An engine's id of an allocated claim (its uid, else `namespace/name`: `dra_allocator::claim_id`).
pub fn allocated_id(claim: &AllocatedClaim) -> String {
    match &*claim.uid {
        "" => claim.key(),
        uid => uid.to_owned(),
    }
}

impl Preemptions {
    /// Forgets nominations of Pods no longer gated (`gated`: uids) and refusals that expired.
    pub fn prune(&mut self, gated: &HashSet<&str>, now: Instant) {
        self.nominations.retain(|uid, _| gated.contains(uid.as_str()));
        self.refused
            .retain(|_, at| now.saturating_duration_since(*at) < REFUSAL_MEMORY);
    }

    /// Removes from `nodes` those nominated to another Pod of equal or higher priority than `pod`.
    pub fn withhold(&self, pod: &LeanPod, nodes: &mut HashSet<String>) {
        let (uid, priority) = (pod.uid().unwrap_or_default(), pod.priority);
        for (nominee, nomination) in &self.nominations {
            if *nominee != uid && nomination.priority >= priority {
                nodes.remove(&nomination.node);
            }
        }
    }

    /// True while `pod`'s victims are still here, or the claims they held still hold devices: its
    /// preemption is under way, and another would evict more than needed (upstream waits the same
    /// way: `PodEligibleToPreemptOthers`).
    pub fn under_way(&self, pod: &str, pods: &HashSet<&str>, allocated: &HashSet<String>) -> bool {
        self.nominations.get(pod).is_some_and(|n| {
            n.victims.iter().any(|v| pods.contains(v.as_str())) || n.claims.iter().any(|c| allocated.contains(c))
        })
    }

    /// Reads back the nomination `pod` carries (`status.nominatedNodeName`) when this process did
    /// not make it: a leader that took over from the one that evicted its victims. Without it the
    /// new leader searches again while the victims terminate, evicts them (or others) a second time
    /// and counts a second preemption, and holds the node for no one. As upstream's
    /// `PodEligibleToPreemptOthers` (pkg/scheduler/framework/plugins/defaultpreemption), the
    /// victims are the Pods of lower priority on the nominated node that are terminating; the
    /// claims are the allocated ones they reserve.
    pub fn adopt(&mut self, pod: &LeanPod, pods: &[Arc<LeanPod>], claims: &[StoredClaim]) {
        let uid = pod.uid().unwrap_or_default();
        let nominated = pod.nominated_node_name.as_deref();
        let Some(node) = nominated.filter(|_| !self.nominations.contains_key(&uid)) else {
            return;
        };
        let victims: BTreeSet<String> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some() && p.priority < pod.priority)
            .filter(|p| p.node_name.as_deref() == Some(node))
            .filter_map(|p| p.metadata.uid.clone())
            .collect();
        let claims = claims
            .iter()
            .filter_map(StoredClaim::allocated)
            .filter(|c| c.reservers.iter().any(|r| victims.contains(&**r)))
            .map(|c| allocated_id(c))
            .collect();
        let nomination = Nomination {
            node: node.to_owned(),
            priority: pod.priority,
            victims,
            claims,
        };
        self.nominations.insert(uid, nomination);
    }

    pub fn nominate(&mut self, pod: &str, nomination: Nomination) {
        self.nominations.insert(pod.to_owned(), nomination);
    }

    pub fn nomination(&self, pod: &str) -> Option<&Nomination> {
        self.nominations.get(pod)
    }

    pub fn has_nominations(&self) -> bool {
        !self.nominations.is_empty()
    }

    /// When the oldest refusal expires: a round must come then, since nothing the controller
    /// watches tells it a budget changed.
    pub fn refusals_expire_in(&self, now: Instant) -> Option<Duration> {
        self.refused
            .values()
            .map(|at| REFUSAL_MEMORY.saturating_sub(now.saturating_duration_since(*at)))
            .min()
    }

    pub fn refuse(&mut self, victim: &str, now: Instant) {
        self.refused.insert(victim.to_owned(), now);
    }

    /// What the search knows of a Pod that reserves claims on a node.
    pub fn holder(&self, pod: &LeanPod) -> Holder {
        let uid = pod.uid().unwrap_or_default();
        Holder {
            pod: format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any()),
            evictable: !self.refused.contains_key(&uid),
            uid,
            priority: pod.priority,
            started: pod.start_time.as_ref().map(|t| t.0),
        }
    }
}

#[cfg(test)]
#[path = "preemption_state_tests.rs"]
mod tests;
