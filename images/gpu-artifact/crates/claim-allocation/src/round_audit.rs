//! The end of every round: the safety audit over what the engine holds (every allocated claim of
//! our driver, whoever allocated it), reported once per violation while it lasts, and the repair
//! of a device held by two claims (see `double_allocation`).

use std::collections::{HashMap, HashSet};

use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::claim_writes::Written;
use crate::double_allocation::{ClaimFacts, deallocations, repair_note};
use crate::pass::{Round, Snapshot, claim_key, reference};

impl Round<'_> {
    pub(crate) async fn audit_and_repair(&mut self, snapshot: &Snapshot) -> anyhow::Result<()> {
        let violations = self.engine.call(|feed| feed.engine.audit_held()).await?;
        let by_key: HashMap<String, _> = snapshot.claims.iter().map(|c| (claim_key(c), c)).collect();
        let current: HashSet<String> = violations.iter().map(ToString::to_string).collect();
        self.memory.reported_violations.retain(|v| current.contains(v));
        for violation in &violations {
            let key = violation.to_string();
            if self.memory.reported_violations.insert(key.clone()) {
                self.metrics.violations.inc();
                tracing::error!(%violation, "safety invariant violated");
                if let Some(claim) = by_key.get(&violation.claim) {
                    self.events
                        .warning(&reference(claim), "InvariantViolated", "Audit", key)
                        .await;
                }
            }
        }
        let facts: HashMap<String, ClaimFacts> = by_key
            .iter()
            .map(|(key, claim)| (key.clone(), ClaimFacts::of(claim)))
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
                    let note = repair_note(&deallocation);
                    tracing::warn!(claim = %deallocation.claim, %note, "repaired a double allocation");
                    self.events
                        .warning(&reference(claim), "DoubleAllocationRepaired", "Deallocate", note)
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
fn holds(claim: &ResourceClaim, device: &str) -> bool {
    claim
        .status
        .iter()
        .flat_map(|s| s.allocation.iter())
        .flat_map(|a| a.devices.iter())
        .flat_map(|d| d.results.iter().flatten())
        .any(|r| format!("{}/{}", r.pool, r.device) == device)
}
