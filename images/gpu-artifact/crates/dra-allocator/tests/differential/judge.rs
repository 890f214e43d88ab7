//! The property, step by step: every allocation ours makes must be accepted by Go when the claim
//! is pinned to exactly our devices, must not come from an invalid pool, and ours must find a
//! solution whenever Go finds one. Known differences are counted, not failed (see `Tally`).
//! All steps of all cases go to one Go process.

use std::collections::BTreeSet;

use allocator_workloads::{GoHarness, device_set, node_of, pinned_claim};
use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::{AllocationResult, ResourceClaim, ResourceClaimStatus, ResourceSlice};
use serde_json::{Value, json};

use crate::case::{Case, pool_of};
use crate::ours::{self, from};
use crate::tally::Tally;

/// What kind of disagreement a failure is; shrinking keeps the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    OursErrors,
    OursUsesInvalidPool,
    GoErrors,
    GoRejectsOurs,
    GoAllocatesPinnedDifferently,
    GoFindsOursNot,
}

#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: Kind,
    /// The claim of the stream it happened at.
    pub claim: usize,
    pub message: String,
}

/// One claim's inputs and ours' answer, with the Go requests it needs (the claim, and the claim
/// pinned to our devices when ours found some).
struct Step {
    case: usize,
    claim: usize,
    claim_json: Value,
    allocated: Vec<Value>,
    outcome: Result<Option<AllocationResult>, String>,
    lines: usize,
}

struct CaseFacts {
    invalid: BTreeSet<(String, String)>,
    label_selector: BTreeSet<(String, String)>,
    selector: bool,
}

fn pools_of_json(allocation: &Value) -> BTreeSet<String> {
    let results = allocation["devices"]["results"].as_array().cloned().unwrap_or_default();
    results
        .iter()
        .map(|r| r["pool"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn is_invalid_pool_error(error: &str) -> bool {
    // v0.34.4 "pool %s is invalid: %s" (search) and "... is currently invalid" (All);
    // v0.37.2 "invalid resource pools were encountered" once nothing was found.
    error.contains(" is invalid: ")
        || error.contains("is currently invalid")
        || error.contains("invalid resource pools were encountered")
}

fn pinned_query(version: &str, case: &Case, query: &Value, claim: &Value, result: &AllocationResult) -> Value {
    let mut q = query.clone();
    q["claim"] = pinned_claim(claim, result);
    q["nodes"] = match node_of(result) {
        Some(node) => json!([case.node(&node).unwrap_or_else(|| json!({"metadata": {"name": node}}))]),
        None => json!(case.nodes()),
    };
    if version == "0.34.4" {
        // v0.34.4 fails the whole attempt once its search reaches an invalid pool, even one that
        // cannot serve the pinned claim; our devices are never in one, so it is left out here.
        let invalid = case.invalid_pools();
        let slices = case.slices().into_iter().filter(|s| !invalid.contains(&pool_of(s)));
        q["slices"] = json!(slices.collect::<Vec<_>>());
    }
    q
}

/// Runs `count` cases (built by `case_at`) through ours and Go. Returns the tally and the first
/// failure with its case's index.
pub fn evaluate(
    version: &'static str,
    classes: &[Value],
    count: usize,
    case_at: &dyn Fn(usize) -> Case,
) -> (Tally, Option<(usize, Failure)>) {
    let mut lines: Vec<String> = Vec::new();
    let mut steps = Vec::new();
    let mut facts = Vec::new();
    let mut tally = Tally::default();
    for index in 0..count {
        let case = case_at(index);
        facts.push(CaseFacts {
            invalid: case.invalid_pools(),
            label_selector: case.label_selector_pools(),
            selector: case.has_selector_pool(),
        });
        tally.exercised.note_case(&case, classes);
        let (slices, nodes) = (json!(case.slices()), json!(case.nodes()));
        let stream = ours::run(&case, classes);
        for (claim, step) in stream.steps.into_iter().enumerate() {
            let allocated = stream.allocated[..step.allocated_before].to_vec();
            let mut lines_of_step = 0;
            if let Ok(ours) = &step.outcome {
                let query = json!({"slices": slices, "classes": classes, "allocated": allocated, "nodes": nodes,
                    "claim": step.claim, "taintRules": case.taint_rules});
                lines.push(query.to_string());
                lines_of_step += 1;
                if let Some(result) = ours {
                    lines.push(pinned_query(version, &case, &query, &step.claim, result).to_string());
                    lines_of_step += 1;
                }
            }
            steps.push(Step {
                case: index,
                claim,
                claim_json: step.claim,
                allocated,
                outcome: step.outcome,
                lines: lines_of_step,
            });
        }
    }
    let mut answers = GoHarness::new(version).run_lines(&lines).into_iter();
    for step in &steps {
        let go: Vec<Value> = answers.by_ref().take(step.lines).collect();
        let facts = &facts[step.case];
        if let Err(failure) = judge(version, step, &go, facts, &mut tally, &|| case_at(step.case)) {
            return (tally, Some((step.case, failure)));
        }
    }
    (tally, None)
}

fn judge(
    version: &str,
    step: &Step,
    go: &[Value],
    facts: &CaseFacts,
    tally: &mut Tally,
    case: &dyn Fn() -> Case,
) -> Result<(), Failure> {
    let fail = |kind: Kind, what: &str, detail: &dyn std::fmt::Display| Failure {
        kind,
        claim: step.claim,
        message: format!(
            "{what}\nclaim: {}\nours: {:?}\ngo: {detail}",
            step.claim_json, step.outcome
        ),
    };
    let ours = match &step.outcome {
        Ok(ours) => ours,
        Err(e) => return Err(fail(Kind::OursErrors, "ours returned an error", e)),
    };
    tally.judged += 1;
    let claim: ResourceClaim = from(&step.claim_json);
    tally
        .exercised
        .note_step(&claim, ours.as_ref(), go[0].get("allocation"), facts.selector);
    let go_error = go[0].get("error").and_then(Value::as_str);
    if go_error.is_some_and(|e| e.starts_with("panic:")) {
        // v0.34.4 indexes the slice with the request's device counter in allocateDevice
        // (CmpRequestOverCapacity(..., r.deviceIndex)) and panics; counted, not ours to fix.
        tally.go_panics += 1;
        return Ok(());
    }
    // Go stopped at an invalid pool (v0.34.4) or found nothing beside one (v0.37.2): ours may
    // have a solution elsewhere (checked below like any other) or none.
    let go_invalid = go_error.is_some_and(is_invalid_pool_error) && !facts.invalid.is_empty();
    if let Some(e) = go_error.filter(|_| !go_invalid) {
        return Err(fail(Kind::GoErrors, "Go reported an error", &e));
    }
    let go_found = go[0].get("allocation").is_some();
    match ours {
        Some(ours) => {
            let from_invalid = ours
                .devices
                .iter()
                .flat_map(|d| d.results.iter().flatten())
                .find(|r| facts.invalid.contains(&(r.driver.clone(), r.pool.clone())));
            if let Some(r) = from_invalid {
                return Err(fail(
                    Kind::OursUsesInvalidPool,
                    "ours allocated from an invalid pool",
                    &r.pool,
                ));
            }
            let pinned = &go[1];
            if pinned
                .get("error")
                .and_then(Value::as_str)
                .is_some_and(|e| e.starts_with("panic:"))
            {
                tally.go_panics += 1;
                return Ok(());
            }
            let Some(accepted) = pinned.get("allocation") else {
                // v0.34.4 checks consumable capacity of slice.Spec.Devices[r.deviceIndex] (the
                // request's device counter) instead of the chosen device, so it rejects shares
                // whose device is not at that position. Counted; every other rejection fails.
                if version == "0.34.4" && device_set(ours).iter().any(|d| d.3.is_some()) {
                    tally.go_capacity_bug += 1;
                    return Ok(());
                }
                return Err(fail(Kind::GoRejectsOurs, "Go rejects our allocation", pinned));
            };
            let accepted: AllocationResult = from(accepted);
            if device_set(&accepted) != device_set(ours) {
                return Err(fail(
                    Kind::GoAllocatesPinnedDifferently,
                    "Go allocates the pinned claim differently",
                    pinned,
                ));
            }
            if go_invalid {
                tally.go_invalid_pool_error_ours_found += 1;
            } else if go_found {
                tally.both += 1;
            } else {
                tally.ours_only += 1;
            }
        }
        None if go_found => {
            // v0.34.4 compares distinctAttribute string values by pointer (constraint.go,
            // matchesAttribute), so distinct strings never collide there.
            let distinct = claim
                .spec
                .devices
                .as_ref()
                .and_then(|d| d.constraints.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.distinct_attribute.is_some()));
            if version == "0.34.4" && distinct {
                tally.go_distinct_bug += 1;
                return Ok(());
            }
            // Go checked the label selector against the node; without Node objects ours does not
            // join node-local devices with devices behind a label selector (see the crate docs).
            let pools = pools_of_json(&go[0]["allocation"]);
            let behind_labels = |p: &String| facts.label_selector.iter().any(|(_, pool)| pool == p);
            if pools.iter().any(behind_labels) && pools.iter().any(|p| p.starts_with("gpus/node-")) {
                tally.go_joins_label_selector += 1;
                return Ok(());
            }
            let case = case();
            if version == "0.34.4"
                && crate::go_v034_shares::takes_counters_of_a_share(
                    &case.slices(),
                    &step.allocated,
                    &go[0]["allocation"],
                )
            {
                tally.go_shares_counters_bug += 1;
                return Ok(());
            }
            // Go found one: acceptable only if Go's choice breaks a safety invariant.
            let slices: Vec<ResourceSlice> = case.slices().iter().map(from).collect();
            let mut claims: Vec<ResourceClaim> = step.allocated.iter().map(from).collect();
            let mut go_claim = claim.clone();
            go_claim.status = Some(ResourceClaimStatus {
                allocation: Some(from(&go[0]["allocation"])),
                ..Default::default()
            });
            claims.push(go_claim);
            if Allocator::new(&slices, &[], &[]).audit(&claims).is_empty() {
                return Err(fail(Kind::GoFindsOursNot, "Go finds a solution, ours does not", &go[0]));
            }
            tally.go_only_unsafe += 1;
        }
        None if go_invalid => tally.go_invalid_pool_error_ours_none += 1,
        None => tally.neither += 1,
    }
    Ok(())
}
