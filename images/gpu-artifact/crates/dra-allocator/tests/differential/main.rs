//! Differential test against the kube-scheduler's structured allocator at the two releases of
//! the test bed: random inventories (with, at low rates, node-selector pools and invalid pools)
//! and claim streams (some with admin access); every allocation ours makes must be accepted by
//! Go when the claim is pinned to exactly our devices and must not come from an invalid pool, and
//! ours must find a solution whenever Go finds one (known differences are counted and reported,
//! see `tally`). Some cases carry admin DeviceTaintRules (`taint_rules`), applied on the Go side by
//! upstream's ResourceSlice tracker. Some shares ask for `memory`, and the run fails if memory never kept
//! a share off a card (`shared_memory`). A failing case is shrunk to a minimal one, written to a JSON file under the
//! temporary directory. `ALLOCATOR_DIFF_CASES` sets the number of claim streams (default 1000).
//!
//! The same cases also drive the incremental check (`incremental`): the engine kept up to date
//! event by event equals one rebuilt from scratch after every event of a random stream
//! (`ALLOCATOR_INCREMENTAL_STREAMS` streams, default 100).

mod case;
mod generator;
mod go_v034_shares;
mod incremental;
mod inventory;
mod judge;
mod ours;
mod shared_memory;
mod shrink;
mod taint_rules;
mod tally;

use allocator_workloads::{Rng, classes};
use serde_json::Value;

use case::Case;
use generator::claim;
use judge::{Failure, evaluate};
use shrink::shrink;

fn generate(version: &'static str, seed: u64) -> Case {
    let split_layout = version != "0.34.4";
    // DRADeviceTaints is alpha (off) in 1.34: Go ignores taints there, so only 1.37 gets them.
    let taints = split_layout;
    let mut rng = Rng::new(seed);
    let units = inventory::units(&mut rng, split_layout, taints);
    let mut claims: Vec<Value> = (0..(1 + rng.below(6)))
        .map(|i| claim(&mut rng, &format!("c{i}"), taints))
        .collect();
    let taint_rules = taint_rules::rules(&mut rng, version, &units);
    if !taint_rules.is_empty() {
        claims.iter_mut().for_each(|c| taint_rules::tolerate_some(&mut rng, c));
    }
    Case {
        version,
        seed,
        units,
        allocated: Vec::new(),
        claims,
        taint_rules,
    }
}

/// The failure of `case` if it is of `failure`'s kind.
fn fails_alike(case: &Case, classes: &[Value], failure: &Failure) -> Option<Failure> {
    let (_, found) = evaluate(case.version, classes, 1, &|_| case.clone());
    found.map(|(_, f)| f).filter(|f| f.kind == failure.kind)
}

/// Shrinks the failing case (claims, then nodes, then, once the claims before the failing one are
/// turned into allocated claims, those), writes the minimal case to a file and fails the test.
fn report(case: Case, classes: &[Value], failure: Failure) -> ! {
    let started = std::time::Instant::now();
    let (case, mut tried) = shrink(case, |c| fails_alike(c, classes, &failure).is_some());
    let at = fails_alike(&case, classes, &failure)
        .expect("the shrunk case fails")
        .claim;
    let frozen = ours::frozen(&case, classes, at);
    let case = if fails_alike(&frozen, classes, &failure).is_some() {
        let (smaller, more) = shrink(frozen, |c| fails_alike(c, classes, &failure).is_some());
        tried += more;
        smaller
    } else {
        case
    };
    let minimal = fails_alike(&case, classes, &failure).expect("the minimal case fails");
    let path = std::env::temp_dir().join(format!(
        "dra-allocator-differential-{}-seed{}.json",
        case.version, case.seed
    ));
    let report = case.report(&format!("{:?}: {}", minimal.kind, minimal.message), classes);
    std::fs::write(&path, serde_json::to_vec_pretty(&report).expect("report serialises")).expect("write the case");
    panic!(
        "{} seed {}: {:?} (shrunk in {tried} tries, {:?}, to {} units, {} allocated claims, {} claims: {})\n{}",
        case.version,
        case.seed,
        minimal.kind,
        started.elapsed(),
        case.units.len(),
        case.allocated.len(),
        case.claims.len(),
        path.display(),
        minimal.message
    );
}

fn run_version(version: &'static str, cases: u64, base_seed: u64) {
    let started = std::time::Instant::now();
    let classes = classes();
    let (tally, failure) = evaluate(version, &classes, cases as usize, &|i| {
        generate(version, base_seed + i as u64)
    });
    eprintln!(
        "differential {version}: {cases} claim streams, {} claims: {tally}; {:?}",
        tally.steps(),
        started.elapsed()
    );
    if let Some((index, failure)) = failure {
        report(generate(version, base_seed + index as u64), &classes, failure);
    }
    assert_eq!(
        tally.steps(),
        tally.judged,
        "every judged claim ends in exactly one count"
    );
    assert!(tally.both > 0, "no claim was allocated by both engines");
    let e = &tally.exercised;
    assert!(
        cases < 200
            || (e.admin_ours > 0
                && e.selector_ours > 0
                && e.invalid_pool_cases > 0
                && e.rule_steps_differ > 0
                && e.memory_changes > 0),
        "the generator stopped exercising admin access, node-selector pools, invalid pools, taint rules or \
         shares' memory: {tally}"
    );
}

fn cases() -> u64 {
    std::env::var("ALLOCATOR_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// Both releases in one test, one after the other on one thread, so only one run's requests are
/// held in memory at a time.
#[test]
fn agrees_with_the_scheduler_at_1_34_and_1_37() {
    run_version("0.34.4", cases() / 2, 1_000_000);
    run_version("0.37.2", cases() - cases() / 2, 2_000_000);
}

/// Random event streams over the same kind of cases, both slice layouts; no Go needed.
#[test]
fn the_engine_kept_up_to_date_equals_a_rebuild_after_every_event() {
    let classes = classes();
    let streams = std::env::var("ALLOCATOR_INCREMENTAL_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100u64);
    let started = std::time::Instant::now();
    let mut events = 0;
    for (version, base) in [("0.34.4", 3_000_000), ("0.37.2", 4_000_000)] {
        for i in 0..streams / 2 {
            let seed = base + i;
            let case = generate(version, seed);
            match incremental::run_stream(&case, &classes, seed) {
                Ok(n) => events += n,
                Err(divergence) => panic!("{version} seed {seed}: {divergence}"),
            }
        }
    }
    eprintln!(
        "incremental: {streams} streams, {events} events, each followed by a rebuild and a state comparison; {:?}",
        started.elapsed()
    );
    assert!(events > streams as usize, "the streams did something");
}
