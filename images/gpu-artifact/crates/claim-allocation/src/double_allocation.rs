//! Repair of a device held by two claims (the scheduler and this controller allocated at the same
//! moment, or two replicas overlapped during a lease change). The node refuses the second prepare,
//! so one of them must give the device back: every holder not yet reserved for a Pod and not
//! prepared is deallocated (and then allocated again); when none is reserved, the earliest
//! allocation stays. Holders that are reserved or prepared are never touched. Pure: the audit's
//! violations and what is known of the claims in, the claims to deallocate out.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use dra_allocator::{GPU_DRIVER, InvariantViolation};
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::jiff::Timestamp;

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

#[cfg(test)]
#[path = "double_allocation_tests.rs"]
mod tests;
