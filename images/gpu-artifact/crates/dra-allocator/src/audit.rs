//! The safety audit of ARCHITECTURE section 8 over allocated claims, whoever allocated them:
//! a card with a MIG allocation carries only MIG allocations; an exclusive Physical allocation
//! is alone on its card; shared Physical allocations of a card all go through one offer (one
//! offer is one sharing strategy); and no counter set is charged beyond its value.
//!
//! Cards are identified by their counter set `pgpu-<pci>`: every offer of a card consumes it in
//! both slice layouts, and it does not depend on attributes a foreign writer could omit.

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::inventory::{GPU_DRIVER, Inventory};
use crate::request::claim_name;
use crate::usage::{Take, Usage, is_mig};

/// One broken invariant, naming the claim and device that broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvariantViolation {
    pub claim: String,
    pub device: String,
    pub reason: String,
}

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "claim {}: device {}: {}", self.claim, self.device, self.reason)
    }
}

pub(crate) fn audit(inventory: &Inventory, claims: &[ResourceClaim]) -> Vec<InvariantViolation> {
    let mut usage = Usage::default();
    let mut violations = Vec::new();
    for claim in claims {
        let Some(allocation) = claim.status.as_ref().and_then(|s| s.allocation.as_ref()) else {
            continue;
        };
        for result in allocation.devices.iter().flat_map(|d| d.results.iter().flatten()) {
            if result.driver != GPU_DRIVER || result.admin_access == Some(true) {
                continue;
            }
            let Some(index) = inventory.device_index(&result.driver, &result.pool, &result.device) else {
                continue;
            };
            let device = &inventory.devices[index];
            let take = if result.share_id.is_some() {
                Take::Share
            } else {
                Take::Exclusive
            };
            let violation = |reason: &str| InvariantViolation {
                claim: claim_name(claim),
                device: format!("{}/{}", result.pool, result.device),
                reason: reason.to_owned(),
            };
            if take == Take::Exclusive && usage.exclusive.contains(&index) {
                violations.push(violation("allocated to more than one claim"));
            }
            if !usage.card_allows(index, device, take) {
                let reason = if is_mig(device) {
                    "MIG allocation on a card that carries a Physical allocation"
                } else if take == Take::Exclusive {
                    "exclusive Physical allocation on a card that carries other allocations"
                } else {
                    "shared Physical allocation on a card that carries a MIG, exclusive or differently shared allocation"
                };
                violations.push(violation(reason));
            }
            if usage.charges_counters(index, take) && !usage.counters_fit(inventory, device) {
                violations.push(violation("counters of its card are over-committed"));
            }
            usage.take(inventory, index, take, None);
        }
    }
    violations
}
