//! What a differential run saw: how each step ended (agreements, and the known differences that
//! are counted instead of failed), and how often the rarer features were exercised, so a run
//! that silently stopped covering admin access, node selectors, invalid pools, taint rules or
//! shares' memory shows it.

use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim};
use serde_json::Value;

use crate::case::Case;

#[derive(Debug, Default)]
pub struct Tally {
    pub both: u64,
    pub neither: u64,
    pub ours_only: u64,
    /// Go found a solution ours did not, and Go's breaks a safety invariant.
    pub go_only_unsafe: u64,
    pub go_panics: u64,
    /// v0.34.4 checks the capacity of the wrong device and rejects some of our shares.
    pub go_capacity_bug: u64,
    /// v0.34.4 compares distinctAttribute strings by pointer.
    pub go_distinct_bug: u64,
    /// v0.34.4 counts no counters of shares and gave an admin a card shares hold
    /// (`go_v034_shares`).
    pub go_shares_counters_bug: u64,
    /// Go returned an error because of an invalid pool (v0.34.4 on touching one, v0.37.2 when
    /// nothing was found beside one), and ours had a solution elsewhere (accepted by Go) ...
    pub go_invalid_pool_error_ours_found: u64,
    /// ... or none.
    pub go_invalid_pool_error_ours_none: u64,
    /// Go joined node-local devices with devices behind a label selector, which ours cannot
    /// check without Node objects, and ours found nothing else.
    pub go_joins_label_selector: u64,
    /// Claims judged (each must end in exactly one of the counts above).
    pub judged: u64,
    pub exercised: Exercised,
}

#[derive(Debug, Default)]
pub struct Exercised {
    pub admin_steps: u64,
    pub admin_ours: u64,
    pub admin_go: u64,
    pub selector_pool_cases: u64,
    pub selector_steps: u64,
    pub selector_ours: u64,
    pub selector_go: u64,
    pub invalid_pool_cases: u64,
    pub rule_cases: u64,
    /// Rule cases whose first claim ours allocates differently without the rules.
    pub rule_steps_differ: u64,
    /// Cases where a share's `memory` kept it off a card its sharePercent fits.
    pub memory_changes: u64,
}

impl Tally {
    /// Steps judged (every step that ends in exactly one counter).
    pub fn steps(&self) -> u64 {
        self.both
            + self.neither
            + self.ours_only
            + self.go_only_unsafe
            + self.go_panics
            + self.go_capacity_bug
            + self.go_distinct_bug
            + self.go_shares_counters_bug
            + self.go_invalid_pool_error_ours_found
            + self.go_invalid_pool_error_ours_none
            + self.go_joins_label_selector
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = &self.exercised;
        write!(
            f,
            "both {}, neither {}, only ours {}, only Go but unsafe {}, Go panicked {}, Go v0.34 capacity-index bug {}, \
             Go v0.34 distinct-by-pointer bug {}, Go v0.34 shares' counters uncounted {}, Go error on an invalid pool {} (ours found one elsewhere {}), Go joined a label selector with a node {}; \
             exercised: admin-access claims {} (ours allocated {}, Go {}), cases with a node-selector pool {} \
             ({} claims; ours used it {}, Go {}), cases with an invalid pool {}, cases with DeviceTaintRules {} \
             (the rules changed the first claim's allocation in {}), cases where a share's memory changed an allocation {}",
            self.both,
            self.neither,
            self.ours_only,
            self.go_only_unsafe,
            self.go_panics,
            self.go_capacity_bug,
            self.go_distinct_bug,
            self.go_shares_counters_bug,
            self.go_invalid_pool_error_ours_found + self.go_invalid_pool_error_ours_none,
            self.go_invalid_pool_error_ours_found,
            self.go_joins_label_selector,
            e.admin_steps,
            e.admin_ours,
            e.admin_go,
            e.selector_pool_cases,
            e.selector_steps,
            e.selector_ours,
            e.selector_go,
            e.invalid_pool_cases,
            e.rule_cases,
            e.rule_steps_differ,
            e.memory_changes,
        )
    }
}

fn uses_selector_pool(pools: impl Iterator<Item = String>) -> bool {
    pools.into_iter().any(|p| p.starts_with("gpus/rack-"))
}

impl Exercised {
    pub fn note_case(&mut self, case: &Case, classes: &[Value]) {
        self.selector_pool_cases += u64::from(case.has_selector_pool());
        self.invalid_pool_cases += u64::from(!case.invalid_pools().is_empty());
        self.rule_cases += u64::from(!case.taint_rules.is_empty());
        self.rule_steps_differ += u64::from(crate::taint_rules::change_the_first_claim(case, classes));
        self.memory_changes += u64::from(crate::shared_memory::changes_an_allocation(case, classes));
    }

    pub fn note_step(
        &mut self,
        claim: &ResourceClaim,
        ours: Option<&AllocationResult>,
        go: Option<&Value>,
        selector_case: bool,
    ) {
        let admin = claim
            .spec
            .devices
            .iter()
            .flat_map(|d| d.requests.iter().flatten())
            .any(|r| r.exactly.as_ref().is_some_and(|e| e.admin_access == Some(true)));
        let ours_results = || {
            ours.into_iter()
                .flat_map(|a| a.devices.iter().flat_map(|d| d.results.iter().flatten()))
        };
        let go_results = || {
            go.and_then(|a| a["devices"]["results"].as_array())
                .into_iter()
                .flatten()
        };
        if admin {
            self.admin_steps += 1;
            self.admin_ours += u64::from(ours_results().any(|r| r.admin_access == Some(true)));
            self.admin_go += u64::from(go_results().any(|r| r["adminAccess"] == true));
        }
        if selector_case {
            self.selector_steps += 1;
            self.selector_ours += u64::from(uses_selector_pool(ours_results().map(|r| r.pool.clone())));
            self.selector_go += u64::from(uses_selector_pool(
                go_results().map(|r| r["pool"].as_str().unwrap_or_default().to_owned()),
            ));
        }
    }
}
