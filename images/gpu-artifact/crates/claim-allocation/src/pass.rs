//! One allocation round over the current stores, with the engine the watches keep up to date:
//! allocate what is ours to allocate, write it without overwriting anyone, remove gates, explain
//! claims that fit nowhere, audit everything and repair a device held twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use dra_allocator::claim_id;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim};
use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use crate::claim_store::ClaimStore;
use crate::claim_writes::{ClaimWrites, Written};
use crate::engine_thread::EngineThread;
use crate::lean_pod::LeanPod;
use crate::metrics::{AllocationLabels, Metrics, add_counts, allocation_counts};
use crate::node_room::{NodeRoom, PinnedPods};
use crate::note_events::NoteEvents;
use crate::pending_claims::Placement;
use crate::pending_notes::PendingNotes;
use crate::pending_reason::NodeFacts;
use crate::preemption_state::Preemptions;
use crate::releases::Releases;
use crate::selection::plan;
use crate::stored_claims::{AllocatedClaim, StoredClaim};

/// How long a round waits for its own allocation writes to come back through the claim watch
/// before it lifts the Pod's gate itself.
const SEEN_WITHIN: Duration = Duration::from_secs(1);

/// What a round sees.
pub struct Snapshot {
    pub claims: Vec<StoredClaim>,
    pub classes: Vec<Arc<DeviceClass>>,
    pub pods: Vec<Arc<LeanPod>>,
    /// Lean Nodes (see `pod_nodes::lean_node`): where a gated Pod may run.
    pub nodes: Vec<Arc<Node>>,
    pub facts: NodeFacts,
}

/// State kept between rounds so Events are not repeated on every round; every map is keyed by
/// something that goes away (a claim, a violation) and is pruned when it does.
#[derive(Default)]
pub struct Memory {
    pub(crate) pending: PendingNotes,
    /// Claims whose allocation panicked, with the resourceVersion it panicked at: not tried again
    /// until the claim changes.
    pub(crate) panicked: HashMap<String, String>,
    pub(crate) reported_violations: HashSet<String>,
    releases: Releases,
    /// Pods whose claims this controller allocated and the scheduler has not bound yet.
    pinned: PinnedPods,
    /// Nominations and refused evictions (see `preemption`); the switch.
    pub preemption: Preemptions,
}

impl Memory {
    /// Forgets claims that are gone: only uids in `live` are kept.
    pub fn prune(&mut self, live: &HashSet<String>) {
        self.pending.prune(live);
        self.panicked.retain(|uid, _| live.contains(uid));
    }

    /// How many claims are remembered, in every map (for tests and metrics).
    pub fn claims_remembered(&self) -> usize {
        self.pending.len() + self.panicked.len()
    }
}

pub struct Round<'a> {
    pub engine: &'a EngineThread,
    pub writes: ClaimWrites<'a>,
    pub events: &'a NoteEvents,
    pub metrics: &'a Metrics,
    pub memory: &'a mut Memory,
    /// The claim store the round's snapshot came from: a Pod whose claims this round allocated is
    /// ungated once the store shows them (none: the next round does).
    pub claims: Option<&'a ClaimStore>,
}

/// What the claims a round wrote add to the allocations gauge: counted as each is written, so the
/// round keeps nothing of them (thousands in a burst). Each was not allocated when the round read
/// the stores, so it is never among the claims the round read allocated.
type NewlyAllocated = BTreeMap<AllocationLabels, i64>;

/// How a round ended: when it should run again although nothing changed (a Pending reason that
/// was rate-limited is due then).
#[derive(Debug, Default)]
pub struct RoundEnd {
    pub again_in: Option<Duration>,
    /// Claims explained in this round (see `pending_claims::EXPLAINED_PER_ROUND`).
    pub(crate) explained: usize,
    /// The MPS results this round gave, by namespace: the snapshot does not hold them yet, and a
    /// later claim of the round must not share their cards across namespaces (`mps_tenancy`).
    pub(crate) mps_given: Vec<(String, Box<str>, Box<str>)>,
}

impl RoundEnd {
    pub(crate) fn again_within(&mut self, wait: Duration) {
        self.again_in = Some(self.again_in.map_or(wait, |w| w.min(wait)));
    }
}

impl Round<'_> {
    /// Runs the round. A claim not yet allocated is let go once tried (the round owns its copy of
    /// the stores): in a burst one round may try thousands, whose allocated records arrive through
    /// the watch meanwhile, and holding every lean claim to the end of the round kept both.
    pub async fn run(&mut self, mut snapshot: Snapshot) -> anyhow::Result<RoundEnd> {
        let mut end = RoundEnd::default();
        for released in self.memory.releases.update(&snapshot.claims) {
            let note = format!("released {}", released.devices.join(", "));
            tracing::info!(claim = %claim_key(&released.claim), %note);
            self.events
                .normal(&reference(&released.claim), "Released", "Deallocate", note)
                .await;
        }
        let live: HashSet<String> = snapshot.claims.iter().map(StoredClaim::id).collect();
        self.memory.prune(&live);
        drop(live);
        let pods = snapshot.pods.iter().filter_map(|p| p.metadata.uid.clone());
        let claims = snapshot.claims.iter().map(|c| c.uid().to_owned());
        self.events.prune(&pods.chain(claims).collect());
        let ignored = self.engine.call(|feed| feed.engine.ignored_slices().len()).await?;
        self.metrics.ignored_slices.set(ignored as i64);
        let by_name = snapshot.classes.iter().map(|c| (c.name_any(), c.clone())).collect();
        let mut work = plan(&snapshot.claims, &snapshot.pods, &by_name);
        let mut room = NodeRoom::of(&snapshot.pods, &mut self.memory.pinned);
        // Highest priority first, so a preemptor takes the devices its victims gave back before
        // any Pod it outranks (see `preemption_state`).
        work.gated.sort_by_key(|g| std::cmp::Reverse(g.pod.priority));
        let gated_uids = work
            .gated
            .iter()
            .filter_map(|g| g.pod.metadata.uid.as_deref())
            .collect();
        self.memory.preemption.prune(&gated_uids, std::time::Instant::now());
        drop(gated_uids);
        for gated in &work.gated {
            self.memory
                .preemption
                .adopt(&gated.pod, &snapshot.pods, &snapshot.claims);
        }
        snapshot.claims.retain(|claim| claim.allocated().is_some());
        let snapshot = &snapshot;
        let mut newly = NewlyAllocated::default();

        for gated in work.gated {
            let mut node: Option<Node> = None;
            let mut results = vec![];
            let mut allowed = room.nodes_for(&gated.pod, &snapshot.nodes);
            self.memory.preemption.withhold(&gated.pod, &mut allowed);
            let allowed = Arc::new(allowed);
            let place = Placement::Among(allowed.clone());
            for claim in &gated.claims {
                let place = node.clone().map_or(place.clone(), |n| Placement::On(Box::new(n)));
                let Some(allocation) = self
                    .try_allocate(claim, place, Some(&gated.pod), snapshot, &mut end)
                    .await?
                else {
                    break;
                };
                node = node.or_else(|| allocation_node(&allocation));
                results.push((claim.clone(), allocation));
            }
            if results.len() != gated.claims.len() {
                self.preempt_for(&gated, &allowed, snapshot, &mut end).await?;
                continue;
            }
            if results.is_empty() {
                // Every claim is allocated and our watch has seen it: only now lift the gate, so the
                // scheduler (whose claim informer sees the same stream) finds the allocation when it
                // picks the Pod up. Lifting it in the round that wrote the allocation lets the
                // scheduler race our write and try to allocate the claim itself.
                self.writes.ungate(&gated.pod).await?;
                continue;
            }
            let keys: Vec<String> = results.iter().map(|(claim, _)| claim_key(claim)).collect();
            for (claim, allocation) in results {
                self.write(&claim, &allocation, &mut newly).await?;
            }
            // The scheduler must find the allocation when it picks the Pod up: its claim informer
            // sees the same stream as our watch, so once our store shows every claim allocated the
            // gate can go in this round instead of the next one's (a burst window and a round
            // later). Not seen in time: the next round lifts it.
            if let Some(store) = self.claims
                && store.until_allocated(&keys, SEEN_WITHIN).await
            {
                self.writes.ungate(&gated.pod).await?;
            }
            if let Some(name) = node.as_ref().and_then(|n| n.metadata.name.as_deref()) {
                room.pin(&gated.pod, name, &mut self.memory.pinned);
            }
        }
        for (pod, claim) in work.unschedulable {
            self.explain_pending(&claim, Some(&pod), &Placement::Anywhere, snapshot, &mut end)
                .await?;
        }

        let before: Vec<Arc<AllocatedClaim>> = snapshot
            .claims
            .iter()
            .filter_map(StoredClaim::allocated)
            .cloned()
            .collect();
        let mut counts = self
            .engine
            .call(move |feed| allocation_counts(before.iter().map(|c| &**c), &feed.engine))
            .await?;
        add_counts(&mut counts, newly);
        self.metrics.set_allocations(&counts);
        self.audit_and_repair(snapshot).await?;
        Ok(end)
    }

    /// Writes an allocation, hands the stored claim to the engine and counts it in `newly`;
    /// nothing when another writer changed the claim first (we keep theirs).
    async fn write(
        &mut self,
        claim: &ResourceClaim,
        allocation: &AllocationResult,
        newly: &mut NewlyAllocated,
    ) -> anyhow::Result<()> {
        let stored = match self.writes.allocation(claim, allocation).await? {
            Written::Yes(stored) => *stored,
            Written::Conflict => {
                tracing::info!(claim = %claim_key(claim), "claim changed while allocating; keeping the other writer's result");
                return Ok(());
            }
        };
        let counts = self
            .engine
            .call(move |feed| {
                feed.wrote(&stored);
                allocation_counts([&AllocatedClaim::of(&stored)], &feed.engine)
            })
            .await?;
        add_counts(newly, counts);
        let devices: Vec<_> = allocation
            .devices
            .iter()
            .flat_map(|d| d.results.iter().flatten())
            .map(|r| format!("{}/{}", r.pool, r.device))
            .collect();
        let note = format!("allocated {}", devices.join(", "));
        tracing::info!(claim = %claim_key(claim), %note);
        if let Some(created) = &claim.metadata.creation_timestamp {
            let seconds = Timestamp::now().duration_since(created.0).as_secs_f64();
            self.metrics.latency.observe(seconds.max(0.0));
        }
        self.memory.pending.forget(&claim_id(claim));
        self.events
            .normal(&reference(claim), "Allocated", "Allocate", note)
            .await;
        Ok(())
    }
}

/// The node an allocation is pinned to (`matchFields metadata.name`), as a Node for the next claim.
fn allocation_node(allocation: &AllocationResult) -> Option<Node> {
    let term = allocation.node_selector.as_ref()?.node_selector_terms.first()?;
    let name = term
        .match_fields
        .iter()
        .flatten()
        .find(|f| f.key == "metadata.name")?
        .values
        .as_ref()?
        .first()?
        .clone();
    let mut node = Node::default();
    node.metadata.name = Some(name);
    Some(node)
}

pub(crate) fn claim_key(claim: &ResourceClaim) -> String {
    format!("{}/{}", claim.namespace().unwrap_or_default(), claim.name_any())
}

pub(crate) fn reference(claim: &ResourceClaim) -> ObjectReference {
    claim.object_ref(&())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn claims_that_went_leave_no_memory() {
        let mut memory = Memory::default();
        let now = Instant::now();
        for uid in ["a", "b", "c"] {
            memory.pending.record(uid, "no device", now);
            memory.panicked.insert(uid.to_owned(), "7".to_owned());
        }
        assert_eq!(memory.claims_remembered(), 6);
        memory.prune(&HashSet::from(["b".to_owned()]));
        assert_eq!(memory.claims_remembered(), 2, "only b, in both maps");
        assert_eq!(memory.panicked.keys().collect::<Vec<_>>(), ["b"]);
        memory.prune(&HashSet::new());
        assert_eq!(memory.claims_remembered(), 0);
    }
}
