//! Repair of a device held by two claims (the scheduler and this controller allocated at the same
//! moment, or two replicas overlapped during a lease change). The node refuses the second prepare,
//! so one of them must give the device back: every holder not yet reserved for a Pod and not
//! prepared is deallocated (and then allocated again); when none is reserved, the earliest
//! allocation stays. Holders that are reserved or prepared are never touched. The decision is pure
//! (the audit's violations and what is known of the claims in, the claims to deallocate out);
//! `Round::audit_and_repair` runs it at the end of every round, after reporting each violation
//! once while it lasts.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use dra_allocator::{GPU_DRIVER, InvariantViolation};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::jiff::Timestamp;

use crate::claim_writes::Written;
use crate::pass::{Round, Snapshot};
use crate::stored_claims::{AllocatedClaim, StoredClaim};

/// The audit's reason for a device that is not multi-allocatable and held by more than one claim.
pub const HELD_TWICE: &str = "allocated to more than one claim";

/// What the repair needs to know of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimFacts {
    pub reserved: bool,
    pub prepared: bool,
    pub allocated_at: Option<Timestamp>,
}

impl ClaimFacts {
    pub fn of(claim: &ResourceClaim) -> ClaimFacts {
        let status = claim.status.as_ref();
        ClaimFacts {
            reserved: status
                .and_then(|s| s.reserved_for.as_ref())
                .is_some_and(|r| !r.is_empty()),
            prepared: status
                .and_then(|s| s.devices.as_ref())
                .is_some_and(|d| d.iter().any(|d| d.driver == GPU_DRIVER)),
            allocated_at: status
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.allocation_timestamp.as_ref())
                .map(|t| t.0),
        }
    }

    fn movable(&self) -> bool {
        !self.reserved && !self.prepared
    }
}

/// One claim to deallocate: it shares `device` with `kept`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deallocation {
    pub claim: String,
    pub device: String,
    pub kept: Vec<String>,
}

/// The claims to deallocate for the violations found, by claim key (`namespace/name`), at most
/// once each. Claims `facts` does not know are left alone.
pub fn deallocations(violations: &[InvariantViolation], facts: &HashMap<String, ClaimFacts>) -> Vec<Deallocation> {
    let mut holders: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for violation in violations.iter().filter(|v| v.reason == HELD_TWICE) {
        let parties = holders.entry(violation.device.as_str()).or_default();
        parties.insert(violation.claim.as_str());
        parties.extend(violation.holders.iter().map(String::as_str));
    }
    let mut done: BTreeSet<&str> = BTreeSet::new();
    let mut out = vec![];
    for (device, parties) in holders {
        let movable: Vec<&str> = parties
            .iter()
            .copied()
            .filter(|p| facts.get(*p).is_some_and(ClaimFacts::movable))
            .collect();
        let mut kept: Vec<&str> = parties.iter().copied().filter(|p| !movable.contains(p)).collect();
        let mut going = movable;
        if kept.is_empty() {
            // Nobody uses the device yet: the first allocation keeps it.
            going.sort_by_key(|p| (facts[*p].allocated_at.is_none(), facts[*p].allocated_at, *p));
            kept.push(going.remove(0));
        }
        for claim in going {
            if done.insert(claim) {
                out.push(Deallocation {
                    claim: claim.to_owned(),
                    device: device.to_owned(),
                    kept: kept.iter().map(|k| (*k).to_owned()).collect(),
                });
            }
        }
    }
    out
}

/// The Event note on a deallocated claim.
pub fn repair_note(deallocation: &Deallocation) -> String {
    format!(
        "device {} was also allocated to {}; this claim was not yet reserved or prepared, so its allocation \
         was cleared and it is allocated again",
        deallocation.device,
        deallocation.kept.join(", ")
    )
}

impl Round<'_> {
    pub(crate) async fn audit_and_repair(&mut self, snapshot: &Snapshot) -> anyhow::Result<()> {
        let violations = self.engine.call(|feed| feed.engine.audit_held()).await?;
        let current: HashSet<String> = violations.iter().map(ToString::to_string).collect();
        self.memory.reported_violations.retain(|v| current.contains(v));
        if violations.is_empty() {
            return Ok(());
        }
        let by_key: HashMap<String, &Arc<AllocatedClaim>> = snapshot
            .claims
            .iter()
            .filter_map(StoredClaim::allocated)
            .map(|c| (c.key(), c))
            .collect();
        for violation in &violations {
            let key = violation.to_string();
            if self.memory.reported_violations.insert(key.clone()) {
                self.metrics.violations.inc();
                tracing::error!(%violation, "safety invariant violated");
                if let Some(claim) = by_key.get(&violation.claim) {
                    self.events
                        .warning(&claim.reference(), "InvariantViolated", "Audit", key)
                        .await;
                }
            }
        }
        let facts: HashMap<String, ClaimFacts> = by_key
            .iter()
            .map(|(key, claim)| (key.clone(), claim.facts.clone()))
            .collect();
        for deallocation in deallocations(&violations, &facts) {
            // Only as the round read it: the claim must still hold the device.
            let Some(claim) = by_key
                .get(&deallocation.claim)
                .filter(|c| holds(c, &deallocation.device))
            else {
                continue;
            };
            match self.writes.deallocation(claim).await? {
                Written::Yes(stored) => {
                    self.engine.call(move |feed| feed.wrote(&stored)).await?;
                    self.metrics.repairs.inc();
                    let note = repair_note(&deallocation);
                    tracing::warn!(claim = %deallocation.claim, %note, "repaired a double allocation");
                    self.events
                        .warning(&claim.reference(), "DoubleAllocationRepaired", "Deallocate", note)
                        .await;
                }
                // It changed since the audit read it: the next round audits it again.
                Written::Conflict => {}
            }
        }
        Ok(())
    }
}

/// Whether `claim`'s allocation holds `device` (`pool/device`).
fn holds(claim: &AllocatedClaim, device: &str) -> bool {
    claim.held.iter().any(|d| d.path() == device)
}

#[cfg(test)]
#[path = "double_allocation_tests.rs"]
mod tests;
