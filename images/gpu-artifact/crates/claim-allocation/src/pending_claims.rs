//! A round's attempt at one claim, and what a claim that gets nothing is told. The engine answers
//! on its own thread; a panic there costs this claim only (it is skipped until it changes) and is
//! reported on it. A claim that fits nowhere is explained by the engine, node by node, at most
//! once per interval, and gets an Event only when the reason changed; so does the Pod waiting for
//! it, where `kubectl describe pod` shows it.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dra_allocator::{AllocationError, Allocator, Explanation, claim_id};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use kube::{Resource, ResourceExt};

use crate::engine_thread::EnginePanic;
use crate::lean_pod::LeanPod;
use crate::mps_tenancy::{confined, foreign_mps_cards, others_mps_results};
use crate::pass::{Round, RoundEnd, Snapshot, claim_key, reference};
use crate::pending_reason::{Unallocated, mig_classes, pending_reason, truncated};

/// Nodes named in a Pending claim's Event.
pub const NEAREST_NODES: usize = 3;

/// Explanations per round, at most (each searches every node); the rest wait for a round soon after.
const EXPLAINED_PER_ROUND: usize = 32;
const MORE_EXPLANATIONS_IN: Duration = Duration::from_secs(5);

/// What the engine said of one claim.
/// Where a claim may be allocated.
#[derive(Clone)]
pub(crate) enum Placement {
    /// On this node: the node of the Pod's claims allocated before it.
    On(Box<Node>),
    /// On one of these nodes: those the claim's Pod may run on.
    Among(Arc<HashSet<String>>),
    /// Anywhere: the claim of a Pod the scheduler places.
    Anywhere,
}

enum Attempt {
    Allocated(AllocationResult),
    NoFit,
    Invalid(AllocationError),
    /// Our write of it has not come back through the watch yet: nothing to do.
    AwaitingWatch,
}

/// The MPS results other namespaces' claims hold (see `mps_tenancy`): those the snapshot shows
/// and those this round gave.
fn others_mps_of(claim: &ResourceClaim, snapshot: &Snapshot, end: &RoundEnd) -> Vec<(Box<str>, Box<str>)> {
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let mut results = others_mps_results(
        namespace,
        snapshot.claims.iter().filter_map(|c| c.allocated().map(|a| &**a)),
    );
    results.extend(
        end.mps_given
            .iter()
            .filter(|(given_to, ..)| given_to != namespace)
            .map(|(_, pool, device)| (pool.clone(), device.clone())),
    );
    results
}

/// `claim` kept off the cards whose MPS shares are another namespace's, and how many cards that is.
fn within_tenancy(
    engine: &Allocator,
    claim: Arc<ResourceClaim>,
    others_mps: &[(Box<str>, Box<str>)],
) -> (Arc<ResourceClaim>, usize) {
    let cards = foreign_mps_cards(engine, others_mps);
    (confined(&claim, &cards).map_or(claim, Arc::new), cards.len())
}

/// What a claim kept off `cards` cards is told besides the engine's reason, which sees only the
/// selector that kept it off them.
fn left_out_note(cards: usize) -> Option<String> {
    (cards > 0).then(|| {
        format!(
            "the MPS offers of {cards} GPU{} left out: another namespace's MPS claims use {}, and a GPU serves the \
             MPS claims of one namespace at a time",
            if cards == 1 { " was" } else { "s were" },
            if cards == 1 { "it" } else { "them" }
        )
    })
}

impl Round<'_> {
    /// Allocates `claim` where `place` says with the engine; `None` when it gets nothing now.
    pub(crate) async fn try_allocate(
        &mut self,
        claim: &Arc<ResourceClaim>,
        place: Placement,
        pod: Option<&LeanPod>,
        snapshot: &Snapshot,
        end: &mut RoundEnd,
    ) -> anyhow::Result<Option<AllocationResult>> {
        let uid = claim_id(claim);
        let version = claim.resource_version().unwrap_or_default();
        if self.memory.panicked.get(&uid) == Some(&version) {
            return Ok(None);
        }
        let (input, within) = (claim.clone(), place.clone());
        let others_mps = others_mps_of(claim, snapshot, end);
        let attempt = self
            .engine
            .call(move |feed| {
                if feed.awaiting_watch(&claim_id(&input)) {
                    return Attempt::AwaitingWatch;
                }
                let (input, _) = within_tenancy(&feed.engine, input, &others_mps);
                let allocated = match &within {
                    Placement::On(node) => feed.engine.allocate(&input, Some(node)),
                    Placement::Among(nodes) => feed.engine.allocate_among(&input, &|name| nodes.contains(name)),
                    Placement::Anywhere => feed.engine.allocate(&input, None),
                };
                match allocated {
                    Ok(Some(allocation)) => Attempt::Allocated(allocation),
                    Ok(None) => Attempt::NoFit,
                    Err(error) => Attempt::Invalid(error),
                }
            })
            .await;
        let why = match attempt {
            Ok(Attempt::Allocated(allocation)) => {
                let namespace = claim.metadata.namespace.clone().unwrap_or_default();
                let results = allocation.devices.iter().flat_map(|d| d.results.iter().flatten());
                end.mps_given.extend(
                    results
                        .filter(|r| r.device.ends_with("-mps"))
                        .map(|r| (namespace.clone(), r.pool.as_str().into(), r.device.as_str().into())),
                );
                return Ok(Some(allocation));
            }
            Ok(Attempt::AwaitingWatch) => return Ok(None),
            Ok(Attempt::NoFit) => {
                return self
                    .explain_pending(claim, pod, &place, snapshot, end)
                    .await
                    .map(|_| None);
            }
            Ok(Attempt::Invalid(error)) => Unallocated::Invalid(error),
            Err(panic) => self.panicked(claim, panic),
        };
        self.tell(claim, pod, &why, None, snapshot, Instant::now()).await;
        Ok(None)
    }

    /// Explains why `claim` fits nowhere `place` allows, if its interval allows, and tells its user.
    pub(crate) async fn explain_pending(
        &mut self,
        claim: &Arc<ResourceClaim>,
        pod: Option<&LeanPod>,
        place: &Placement,
        snapshot: &Snapshot,
        end: &mut RoundEnd,
    ) -> anyhow::Result<()> {
        let now = Instant::now();
        if let Err(wait) = self.memory.pending.due(&claim_id(claim), now) {
            end.again_within(wait);
            return Ok(());
        }
        if end.explained >= EXPLAINED_PER_ROUND {
            end.again_within(MORE_EXPLANATIONS_IN);
            return Ok(());
        }
        end.explained += 1;
        let (input, others_mps) = (claim.clone(), others_mps_of(claim, snapshot, end));
        let explained: Result<(Result<Option<Explanation>, AllocationError>, usize), EnginePanic> = self
            .engine
            .call(move |feed| {
                let (input, left_out) = within_tenancy(&feed.engine, input, &others_mps);
                (feed.engine.explain(&input, NEAREST_NODES), left_out)
            })
            .await;
        let (explained, note) = match explained {
            Ok((explained, left_out)) => (Ok(explained), left_out_note(left_out)),
            Err(panic) => (Err(panic), None),
        };
        let why = match explained {
            Ok(Ok(Some(explanation))) => Unallocated::NoFit(explanation),
            Ok(Ok(None)) => match place {
                // It fits, but on no node its Pod may run on.
                Placement::Among(nodes) => Unallocated::NotWherePodRuns(nodes.len()),
                // It fits after all (something was freed meanwhile): the next round allocates it.
                _ => return Ok(()),
            },
            Ok(Err(error)) => Unallocated::Invalid(error),
            Err(panic) => self.panicked(claim, panic),
        };
        self.tell(claim, pod, &why, note, snapshot, now).await;
        Ok(())
    }

    fn panicked(&mut self, claim: &ResourceClaim, panic: EnginePanic) -> Unallocated {
        tracing::error!(claim = %claim_key(claim), %panic, "allocation panicked; the claim is skipped until it changes");
        self.memory
            .panicked
            .insert(claim_id(claim), claim.resource_version().unwrap_or_default());
        self.metrics.panics.inc();
        Unallocated::Panicked(panic)
    }

    /// Records the reason (with `note` after it) and publishes it on the claim (and its Pod) when it changed.
    async fn tell(
        &mut self,
        claim: &ResourceClaim,
        pod: Option<&LeanPod>,
        why: &Unallocated,
        note: Option<String>,
        snapshot: &Snapshot,
        now: Instant,
    ) {
        let classes: BTreeSet<String> = mig_classes(snapshot.classes.iter().map(|c| &**c));
        let mut text = pending_reason(why, &snapshot.facts, &classes);
        if let Some(note) = note {
            text = truncated(format!("{text}; {note}"));
        }
        if !self.memory.pending.record(&claim_id(claim), &text, now) {
            return;
        }
        tracing::info!(claim = %claim_key(claim), reason = %text, "cannot allocate");
        if let Some(pod) = pod {
            let note = pod_note(&claim.name_any(), &text);
            self.events
                .warning(&pod.object_ref(&()), "CannotAllocate", "Allocate", note)
                .await;
        }
        self.events
            .warning(&reference(claim), "CannotAllocate", "Allocate", text)
            .await;
    }
}

/// The Pod's Event note: which claim, and its reason (within an Event's 1024 bytes).
pub fn pod_note(claim: &str, reason: &str) -> String {
    let reason = reason.strip_prefix("cannot allocate: ").unwrap_or(reason);
    truncated(format!("claim {claim} cannot be allocated: {reason}"))
}

#[cfg(test)]
#[path = "pending_claims_tests.rs"]
mod tests;
