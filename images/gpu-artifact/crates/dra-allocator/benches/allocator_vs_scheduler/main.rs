//! `make bench`: our allocation engine against the kube-scheduler's structured allocator
//! (k8s.io/dynamic-resource-allocation, run in-process by tools/allocator-harness), on the same
//! workloads in the same run, for the 1.35+ slice layout against v0.37.2 and the 1.34 layout
//! against v0.34.4.
//!
//! Throughput and latency: 1,000 nodes x 8 GPUs, 10,000 mixed claims allocated one after the
//! other. Both engines run the same loop, the one the scheduler runs for a pod: nodes in the same
//! order, starting after the node the previous claim took (the scheduler's rotating
//! `nextStartNodeIndex`), until one fits, then the allocation is counted. Per claim, Go builds
//! its allocator over the allocated state (as the scheduler does once per scheduling cycle) and
//! ours reuses the one it keeps (as our controller does), whose one-off construction is shown
//! apart. Each engine times itself in-process (no start-up, no JSON); Go runs with GOMAXPROCS=1,
//! as ours runs on one thread, so its garbage collector works on the same core (set GOMAXPROCS
//! to give it more).
//!
//! Packing (1.35+ layout only: the engines' choices do not depend on the layout): 50 nodes x 8
//! GPUs and MIG claims of mixed sizes until the first claim fits nowhere; nodes always tried from
//! the first, so the difference is the choice within a node: ours best fit, Go the first solution.
//!
//! Topology (1.35+ layout only, see `topology`): claims of 2 and 4 whole H100s on two-socket nodes,
//! arriving and leaving, ours as the controller allocates against Go's first fit: the share on one
//! NUMA node and the nodes in use.
//!
//! The controller's path, ours alone on the same inventory and claims: each claim allocated best
//! fit across the whole cluster (no node given) and committed, and the cost of single events on
//! the loaded engine (a node republishing its slices, a claim arriving or going), beside the
//! one-off build from scratch that the controller no longer does per round.
//!
//! Both engines are timed on the slices as gpu-handler publishes them. Every allocation ours makes
//! is then replayed under Go, pinned to our devices on our node (through an attribute only the
//! replay's copy of the slices carries) over the state of our earlier allocations; the benchmark
//! fails if Go rejects one.
//! `ALLOCATOR_BENCH_NODES` and `ALLOCATOR_BENCH_CLAIMS` shrink the first workload for a quick run;
//! `ALLOCATOR_BENCH_OURS_ONLY` stops after our engine's runs (for profiling it).

mod controller_path;
mod engine_run;
mod go_engine;
mod report;
mod topology;

use allocator_workloads::GoHarness;
use allocator_workloads::bench_workload as workload;

use engine_run::{EngineRun, NodeOrder, run_ours};
use report::{Comparison, print_table};

const INVENTORY_SEED: u64 = 2026;
const MIXED_CLAIMS_SEED: u64 = 6;
const PACKING_INVENTORY_SEED: u64 = 50;
const PACKING_CLAIMS_SEED: u64 = 8;
const PACKING_NODES: usize = 50;
/// More than 50 nodes x 8 GPUs x 7 MIG instances: the stream cannot outlast the capacity.
const PACKING_CLAIMS: usize = 3_000;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Packing: ours and Go over the small inventory, and how many of ours Go accepted on replay.
fn packing(go: &GoHarness, split_layout: bool) -> (EngineRun, EngineRun, usize) {
    let inventory = workload::inventory(PACKING_INVENTORY_SEED, PACKING_NODES, split_layout);
    let mig = workload::mig_claims(PACKING_CLAIMS_SEED, PACKING_CLAIMS);
    let (ours, placements, _) = run_ours(&inventory, &mig, NodeOrder::Fixed, true);
    let answers = go.run(&[
        go_engine::load(&inventory),
        go_engine::bench(&mig, NodeOrder::Fixed, true),
        go_engine::replay(&mig, &placements),
    ]);
    let validated = go_engine::check_replay(&go.version, &mig, &placements, &answers[2]);
    let go_run = go_engine::engine_run(&answers[1]);
    for (engine, run) in [("ours", &ours), ("Go", &go_run)] {
        assert!(
            run.placed_before_first_failure() < run.placed_on.len(),
            "packing: {engine} never failed; the stream is too short"
        );
    }
    (ours, go_run, validated)
}

fn compare(layout: &'static str, version: &'static str, split_layout: bool, with_packing: bool) -> Comparison {
    let nodes = setting("ALLOCATOR_BENCH_NODES", 1_000);
    let claims = setting("ALLOCATOR_BENCH_CLAIMS", 10_000);
    eprintln!("allocator bench {layout} / v{version}: {nodes} nodes x 8 GPUs, {claims} claims");
    // Both engines are timed on the slices as gpu-handler publishes them; the pinning attribute
    // (one unique string per device, which also gives every device a kind of its own in ours) is
    // loaded into Go only to replay our allocations.
    let inventory = workload::inventory(INVENTORY_SEED, nodes, split_layout).as_published();
    let mixed = workload::mixed_claims(MIXED_CLAIMS_SEED, claims);
    let (ours, placements, ours_setup) = run_ours(&inventory, &mixed, NodeOrder::Rotating, false);
    eprintln!(
        "allocator bench {layout}: ours took {:?}; the controller's path",
        ours.wall
    );
    let (best_fit, events) = controller_path::run(&inventory, &mixed);
    eprintln!(
        "allocator bench {layout}: best fit took {:?} (build {:?}, setup {:?}); now Go",
        best_fit.wall, events.build, ours_setup
    );
    if std::env::var_os("ALLOCATOR_BENCH_OURS_ONLY").is_some() {
        // For profiling our side: the table needs Go, so stop here.
        std::process::exit(0);
    }
    let mut go = GoHarness::new(version);
    if std::env::var_os("GOMAXPROCS").is_none() {
        go.env.push(("GOMAXPROCS".to_owned(), "1".to_owned()));
    }
    let pinnable = workload::inventory(INVENTORY_SEED, nodes, split_layout);
    let answers = go.run(&[
        go_engine::load(&inventory),
        go_engine::bench(&mixed, NodeOrder::Rotating, false),
        go_engine::load(&pinnable),
        go_engine::replay(&mixed, &placements),
    ]);
    drop(pinnable);
    let mut validated = go_engine::check_replay(version, &mixed, &placements, &answers[3]);
    let packing = with_packing.then(|| {
        eprintln!("allocator bench {layout}: packing");
        let (ours, go, checked) = packing(&go, split_layout);
        validated += checked;
        (ours, go)
    });
    let topology = with_packing.then(|| {
        eprintln!("allocator bench {layout}: topology");
        let (ours, go, checked) = topology::run(&go);
        validated += checked;
        (ours, go)
    });
    Comparison {
        layout,
        version,
        nodes,
        ours,
        go: go_engine::engine_run(&answers[1]),
        ours_setup,
        best_fit,
        events,
        packing,
        topology,
        validated,
    }
}

fn main() {
    let comparisons = [
        compare("1.35+ split", "0.37.2", true, true),
        // The engines' choices do not depend on the layout: packing and topology are measured once.
        compare("1.34", "0.34.4", false, false),
    ];
    print_table(&comparisons);
}
