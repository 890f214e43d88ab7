//! Priority preemption for gated Pods: a gated Pod that fits nowhere may evict Pods of lower
//! priority that hold devices of our driver (kube-scheduler has no preemption for DRA devices:
//! KEP-5690). Victims are chosen by `preemption_search` on the engine's thread, evicted through
//! the Eviction API (`pods/eviction`) so PodDisruptionBudgets hold, and their node is held for
//! the preemptor (`preemption_state`). Each eviction is tried as a dry run first: a budget that
//! refuses one (HTTP 429) makes the search pick other victims before anything is evicted, or the
//! preemptor waits and is told why.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use dra_allocator::{AllocationError, Allocator, GPU_DRIVER};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{EvictParams, PostParams};
use kube::{Api, Resource, ResourceExt};

use crate::lean_pod::LeanPod;
use crate::metrics::PreemptionLabels;
use crate::pass::{Round, RoundEnd, Snapshot};
use crate::preemption_search::{Candidate, HeldClaim, Holder, NodeHolders, choose_victims};
use crate::preemption_state::{Nomination, REFUSAL_MEMORY, allocated_id};
use crate::selection::GatedPod;
use crate::stored_claims::AllocatedClaim;

/// Searches per preemption at most: each refusal found by a dry run passes that Pod over.
const SEARCHES: usize = 3;

/// What a search reads, owned, for the engine's thread.
#[derive(Clone)]
struct SearchInput {
    priority: i32,
    claims: Vec<Arc<ResourceClaim>>,
    allocated: Vec<Arc<AllocatedClaim>>,
    /// Pods reserving claims, by uid.
    holders: HashMap<String, Holder>,
    /// The nodes the preemptor may run on.
    nodes: HashMap<String, Arc<Node>>,
}

/// Groups the allocated claims by the node of their devices (the engine knows it from the slices),
/// on the nodes the preemptor may run on, and asks `preemption_search` for the best victims.
fn search(
    engine: &mut Allocator,
    input: &SearchInput,
) -> Result<Option<(Candidate, BTreeSet<String>)>, AllocationError> {
    let mut by_node: BTreeMap<String, NodeHolders> = BTreeMap::new();
    for claim in &input.allocated {
        let Some(held) = claim.held.first() else { continue };
        let Some((_, Some(node))) = engine.device_labels(GPU_DRIVER, &held.pool, &held.device, &[]) else {
            continue;
        };
        if !input.nodes.contains_key(node) {
            continue;
        }
        let entry = by_node.entry(node.to_owned()).or_insert_with(|| NodeHolders {
            node: node.to_owned(),
            ..NodeHolders::default()
        });
        let reservers: Vec<String> = claim.reservers.iter().map(|r| r.to_string()).collect();
        for holder in reservers.iter().filter_map(|r| input.holders.get(r)) {
            if !entry.holders.iter().any(|h| h.uid == holder.uid) {
                entry.holders.push(holder.clone());
            }
        }
        entry.claims.push(HeldClaim {
            id: allocated_id(claim),
            reservers,
        });
    }
    let nodes: Vec<NodeHolders> = by_node.into_values().collect();
    let claims: Vec<&ResourceClaim> = input.claims.iter().map(|c| &**c).collect();
    let mut fits = |node: &str, released: &[&str]| engine.fits_if_released(&claims, &input.nodes[node], released);
    let Some(candidate) = choose_victims(input.priority, &nodes, &mut fits)? else {
        return Ok(None);
    };
    let released = nodes
        .iter()
        .find(|n| n.node == candidate.node)
        .map(|n| n.released_by(&candidate))
        .unwrap_or_default();
    Ok(Some((candidate, released)))
}

/// What the Eviction API said.
enum Evicted {
    Yes,
    /// A PodDisruptionBudget forbids it now (429), with the API server's message.
    Refused(String),
}

fn pod_reference(holder: &Holder) -> ObjectReference {
    let (namespace, name) = holder.pod.split_once('/').unwrap_or(("", &holder.pod));
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        uid: Some(holder.uid.clone()),
        ..ObjectReference::default()
    }
}

fn names(victims: &[Holder]) -> String {
    victims.iter().map(|v| v.pod.as_str()).collect::<Vec<_>>().join(", ")
}

impl Round<'_> {
    /// Preempts for `gated`, which fits on none of `allowed`, if it may and lower-priority Pods
    /// hold what it needs there.
    pub(crate) async fn preempt_for(
        &mut self,
        gated: &GatedPod,
        allowed: &HashSet<String>,
        snapshot: &Snapshot,
        end: &mut RoundEnd,
    ) -> anyhow::Result<()> {
        let pod = &gated.pod;
        let uid = pod.uid().unwrap_or_default();
        if !self.memory.preemption.enabled || !pod.may_preempt || gated.claims.is_empty() {
            return Ok(());
        }
        if let Some(wait) = self.memory.preemption.refusals_expire_in(Instant::now()) {
            end.again_within(wait);
        }
        if self.memory.preemption.nomination(&uid).is_some() {
            let pods: HashSet<&str> = snapshot.pods.iter().filter_map(|p| p.metadata.uid.as_deref()).collect();
            let allocated: HashSet<String> = snapshot
                .claims
                .iter()
                .filter_map(|c| c.allocated())
                .map(|c| allocated_id(c))
                .collect();
            if self.memory.preemption.under_way(&uid, &pods, &allocated) {
                tracing::debug!(pod = %pod.name_any(), "preemption under way: its victims are still going");
                return Ok(());
            }
        }
        let reservers: HashSet<&str> = snapshot
            .claims
            .iter()
            .filter_map(|c| c.allocated())
            .flat_map(|c| c.reservers.iter().map(|r| &**r))
            .collect();
        let mut input = Arc::new(SearchInput {
            priority: pod.priority,
            claims: gated.claims.clone(),
            allocated: snapshot.claims.iter().filter_map(|c| c.allocated()).cloned().collect(),
            holders: snapshot
                .pods
                .iter()
                .filter(|p| p.metadata.uid.as_deref().is_some_and(|u| reservers.contains(u)))
                .map(|p| (p.uid().unwrap_or_default(), self.memory.preemption.holder(p)))
                .collect(),
            nodes: snapshot
                .nodes
                .iter()
                .filter(|n| n.metadata.name.as_ref().is_some_and(|n| allowed.contains(n)))
                .map(|n| (n.name_any(), n.clone()))
                .collect(),
        });
        let mut refusals: Vec<String> = vec![];
        for _ in 0..SEARCHES {
            let asked = input.clone();
            let found = self.engine.call(move |feed| search(&mut feed.engine, &asked)).await?;
            let Some((candidate, released)) = found? else {
                tracing::debug!(pod = %pod.name_any(), holders = input.holders.len(), nodes = input.nodes.len(),
                    "no lower-priority Pods whose eviction would make room");
                break;
            };
            let refused = self.evict_all(&candidate, true).await?;
            if refused.is_empty() {
                return self.evicted(pod, candidate, released).await;
            }
            for (victim, message) in refused {
                self.memory.preemption.refuse(&victim.uid, Instant::now());
                if let Some(holder) = Arc::make_mut(&mut input).holders.get_mut(&victim.uid) {
                    holder.evictable = false;
                }
                refusals.push(format!("evicting {} is refused: {message}", victim.pod));
            }
        }
        if !refusals.is_empty() {
            end.again_within(REFUSAL_MEMORY);
            self.blocked(pod, &refusals.join("; ")).await;
        }
        Ok(())
    }

    /// Evicts `candidate`'s victims (or tries to, with `dry_run`); the refused, with why.
    async fn evict_all(&self, candidate: &Candidate, dry_run: bool) -> anyhow::Result<Vec<(Holder, String)>> {
        let mut refused = vec![];
        for victim in &candidate.victims {
            if let Evicted::Refused(message) = self.evict(victim, dry_run).await? {
                refused.push((victim.clone(), message));
            }
        }
        Ok(refused)
    }

    async fn evict(&self, victim: &Holder, dry_run: bool) -> anyhow::Result<Evicted> {
        self.writes.fenced().await?;
        let (namespace, name) = victim.pod.split_once('/').unwrap_or(("", &victim.pod));
        let params = EvictParams {
            post_options: PostParams {
                dry_run,
                field_manager: Some(crate::FIELD_MANAGER.into()),
            },
            ..EvictParams::default()
        };
        let client = self
            .memory
            .preemption
            .eviction_client
            .as_ref()
            .unwrap_or(self.writes.client);
        match Api::<Pod>::namespaced(client.clone(), namespace)
            .evict(name, &params)
            .await
        {
            Ok(_) => Ok(Evicted::Yes),
            // Gone already: its devices are coming back.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Evicted::Yes),
            Err(kube::Error::Api(status)) if status.code == 429 => Ok(Evicted::Refused(status.message)),
            Err(error) => Err(error.into()),
        }
    }

    /// Evicts the victims the dry run allowed, tells both sides and nominates the preemptor.
    async fn evicted(&mut self, pod: &LeanPod, candidate: Candidate, released: BTreeSet<String>) -> anyhow::Result<()> {
        let refused = self.evict_all(&candidate, false).await?;
        let preemptor = format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any());
        let evicted: Vec<Holder> = candidate
            .victims
            .iter()
            .filter(|v| !refused.iter().any(|(r, _)| r.uid == v.uid))
            .cloned()
            .collect();
        for victim in &evicted {
            let note = format!(
                "preempted by {preemptor} (priority {}) to free GPUs on node {}",
                pod.priority, candidate.node
            );
            tracing::info!(pod = %victim.pod, %note);
            self.events
                .normal(&pod_reference(victim), "Preempted", "Preempt", note)
                .await;
        }
        let note = format!("preempting {} on node {}", names(&evicted), candidate.node);
        tracing::info!(pod = %preemptor, %note);
        self.events
            .normal(&pod.object_ref(&()), "Preempting", "Preempt", note)
            .await;
        let outcome = if refused.is_empty() { "evicted" } else { "blocked" };
        let labels = PreemptionLabels {
            outcome: outcome.to_owned(),
        };
        self.metrics.preemptions.get_or_create(&labels).inc();
        for (victim, _) in &refused {
            self.memory.preemption.refuse(&victim.uid, Instant::now());
        }
        // A victim refused now (a budget changed since the dry run) stays: waiting for it or its
        // claims would wait for ever. Only the evicted are waited for, and once they are gone
        // the preemptor searches again, passing the refused over.
        let claims = if refused.is_empty() { released } else { BTreeSet::new() };
        let nomination = Nomination {
            node: candidate.node,
            priority: pod.priority,
            victims: evicted.iter().map(|v| v.uid.clone()).collect(),
            claims,
        };
        if let Err(error) = self.writes.nominate(pod, &nomination.node).await {
            // The hold in memory stands; only the lifter's longer bound and the scheduler's
            // preference for the node are lost.
            tracing::warn!(pod = %preemptor, %error, "could not write the Pod's nominated node");
        }
        self.memory
            .preemption
            .nominate(&pod.uid().unwrap_or_default(), nomination);
        Ok(())
    }

    /// Tells the preemptor why it waits: the evictions it needs are refused.
    async fn blocked(&self, pod: &LeanPod, why: &str) {
        let note = format!("cannot preempt: {why}; waiting");
        tracing::info!(pod = %pod.name_any(), %note);
        let labels = PreemptionLabels {
            outcome: "blocked".to_owned(),
        };
        self.metrics.preemptions.get_or_create(&labels).inc();
        self.events
            .warning(&pod.object_ref(&()), "PreemptionBlocked", "Preempt", note)
            .await;
    }
}
