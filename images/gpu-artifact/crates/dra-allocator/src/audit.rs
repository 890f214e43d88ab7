//! The safety audit of ARCHITECTURE section 8 over allocated claims, whoever allocated them:
//! a device that is not multi-allocatable is held by one claim; a card with a MIG allocation
//! carries only MIG allocations; an exclusive Physical allocation is alone on its card; shared
//! Physical allocations of a card all go through one offer (one offer is one sharing strategy);
//! and no counter set is charged beyond its value. Each violation names the claims that held what
//! the violating claim also took, so a repair can choose which one gives it back.
//!
//! Cards are identified by their counter set `pgpu-<pci>`: every offer of a card consumes it in
//! both slice layouts, and it does not depend on attributes a foreign writer could omit.

use k8s_openapi::api::resource::v1::AllocationResult;

use crate::holdings::Holdings;
use crate::inventory::{GPU_DRIVER, Inventory};
use crate::usage::{Take, Usage};

/// One broken invariant, naming the claim and device that broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantViolation {
    pub claim: String,
    pub device: String,
    pub reason: String,
    /// Claims (`namespace/name`) that held the device or its card before `claim` took it.
    pub holders: Vec<String>,
}

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "claim {}: device {}: {}", self.claim, self.device, self.reason)?;
        if !self.holders.is_empty() {
            write!(f, " (held by {})", self.holders.join(", "))?;
        }
        Ok(())
    }
}

/// What the audit has replayed so far. Who took what is one list in taking order, read only to name
/// the holders of a violation (rare): a map of owned names per device and per card cost a list and
/// a copy of the name for every held device, every round.
#[derive(Default)]
struct Replay<'a> {
    usage: Usage,
    /// (device slot, its card, claim) for every result taken so far.
    taken: Vec<(u32, Option<u32>, &'a str)>,
    violations: Vec<InvariantViolation>,
}

impl<'a> Replay<'a> {
    /// The claims that took `slot`, or any device of `card`, so far.
    fn holders(&self, slot: Option<u32>, card: Option<u32>) -> Vec<String> {
        let held = |(s, c, _): &&(u32, Option<u32>, &str)| slot == Some(*s) || (card.is_some() && card == *c);
        self.taken
            .iter()
            .filter(held)
            .map(|(_, _, claim)| claim.to_string())
            .collect()
    }

    fn result(&mut self, inventory: &Inventory, claim: &'a str, slot: u32, take: Take) {
        let device = inventory.device(slot);
        let pool = inventory.pool(device.pool);
        let violation = |reason: &str, holders: Vec<String>| InvariantViolation {
            claim: claim.to_owned(),
            device: format!("{}/{}", pool.name, device.raw.name()),
            reason: reason.to_owned(),
            holders,
        };
        if take == Take::Exclusive && self.usage.is_exclusive(slot) {
            let holders = self.holders(Some(slot), None);
            self.violations
                .push(violation("allocated to more than one claim", holders));
        }
        if !self.usage.card_allows(slot, device, take) {
            let reason = if device.raw.kind.is_mig {
                "MIG allocation on a card that carries a Physical allocation"
            } else if take == Take::Exclusive {
                "exclusive Physical allocation on a card that carries other allocations"
            } else {
                "shared Physical allocation on a card that carries a MIG, exclusive or differently shared allocation"
            };
            self.violations.push(violation(reason, self.holders(None, device.card)));
        }
        if self.usage.charges_counters(slot, take) && !self.usage.counters_fit(inventory, device) {
            let holders = self.holders(None, device.card);
            self.violations
                .push(violation("counters of its card are over-committed", holders));
        }
        self.usage.take(inventory, slot, take, None);
        self.taken.push((slot, device.card, claim));
    }
}

fn is_ours(inventory: &Inventory, slot: u32) -> bool {
    inventory.driver_of(slot) == GPU_DRIVER
}

/// Audits `claims` (name, allocation), in the order given.
pub(crate) fn audit<'a>(
    inventory: &Inventory,
    claims: impl Iterator<Item = (&'a str, &'a AllocationResult)>,
) -> Vec<InvariantViolation> {
    let mut replay = Replay::default();
    for (claim, allocation) in claims {
        for result in allocation.devices.iter().flat_map(|d| d.results.iter().flatten()) {
            if result.driver != GPU_DRIVER || result.admin_access == Some(true) {
                continue;
            }
            let Some(slot) = inventory.device_index(&result.driver, &result.pool, &result.device) else {
                continue;
            };
            let take = if result.share_id.is_some() {
                Take::Share
            } else {
                Take::Exclusive
            };
            replay.result(inventory, claim, slot, take);
        }
    }
    replay.violations
}

/// Audits what the engine's claims hold, in claim name order.
pub(crate) fn audit_holdings(inventory: &Inventory, holdings: &Holdings) -> Vec<InvariantViolation> {
    let mut held: Vec<_> = holdings.claims.values().collect();
    held.sort_by(|a, b| a.name.cmp(&b.name));
    let mut replay = Replay::default();
    for claim in held {
        for holding in &claim.holdings {
            let Some((slot, _)) = holding.taken else { continue };
            if !is_ours(inventory, slot) {
                continue;
            }
            let take = if holding.share.is_some() {
                Take::Share
            } else {
                Take::Exclusive
            };
            replay.result(inventory, &claim.name, slot, take);
        }
    }
    replay.violations
}
