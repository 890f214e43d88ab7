//! The benchmark's one table: per layout and Go release, absolute numbers of both engines and
//! the ratios ours/Go (throughput and packing: higher is better for ours; p99: lower is).

use std::time::Duration;

use crate::controller_path::EventCosts;
use crate::engine_run::EngineRun;
use crate::topology::TopologyRun;

/// One layout against one Go release.
pub struct Comparison {
    pub layout: &'static str,
    pub version: &'static str,
    pub nodes: usize,
    pub ours: EngineRun,
    pub go: EngineRun,
    pub ours_setup: Duration,
    /// Ours on the controller's path: best fit across the cluster per claim.
    pub best_fit: EngineRun,
    pub events: EventCosts,
    /// Ours and Go over the packing workload, where it was measured.
    pub packing: Option<(EngineRun, EngineRun)>,
    /// Ours and Go over the topology workload, where it was measured.
    pub topology: Option<(TopologyRun, TopologyRun)>,
    /// Allocations of ours that Go accepted on replay (all of them, or the run panicked).
    pub validated: usize,
}

/// Nearest-rank percentile of the per-claim latencies, in microseconds.
fn percentile_us(run: &EngineRun, p: f64) -> f64 {
    percentile_of(&run.latencies, p)
}

fn percentile_of(latencies: &[Duration], p: f64) -> f64 {
    let mut sorted = latencies.to_vec();
    sorted.sort();
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e6
}

fn claims_per_second(run: &EngineRun) -> f64 {
    run.latencies.len() as f64 / run.wall.as_secs_f64()
}

fn row(metric: &str, ours: f64, go: f64, precision: usize) {
    println!(
        "  {metric:<34} {ours:>12.precision$} {go:>12.precision$} {:>9.2}",
        ours / go
    );
}

pub fn print_table(comparisons: &[Comparison]) {
    println!();
    println!("Allocation engine against the kube-scheduler's structured allocator (same workloads, same run)");
    println!("  throughput: 8 H100-SXM5-80GB per node (26 offers a card: whole and every MIG placement),");
    println!("  mixed claims, nodes tried in the scheduler's rotating order; packing: 50 nodes x 8 GPUs, MIG");
    println!("  claims of mixed sizes until the first fits nowhere, nodes tried from the first.");
    println!("  controller's path (ours only): best fit across the cluster per claim, then commit.");
    for c in comparisons {
        println!();
        println!(
            "{} layout vs k8s.io/dynamic-resource-allocation v{} (Kubernetes v1.{}), {} nodes, {} claims",
            c.layout,
            c.version,
            c.version.trim_start_matches("0."),
            c.nodes,
            c.ours.latencies.len()
        );
        println!("  {:<34} {:>12} {:>12} {:>9}", "metric", "ours", "Go", "ours/Go");
        row("claims/s", claims_per_second(&c.ours), claims_per_second(&c.go), 0);
        row(
            "p50 per claim (us)",
            percentile_us(&c.ours, 0.50),
            percentile_us(&c.go, 0.50),
            1,
        );
        row(
            "p99 per claim (us)",
            percentile_us(&c.ours, 0.99),
            percentile_us(&c.go, 0.99),
            1,
        );
        row("claims placed", c.ours.placed() as f64, c.go.placed() as f64, 0);
        if let Some((ours, go)) = &c.packing {
            row(
                "packing: placed before 1st failure",
                ours.placed_before_first_failure() as f64,
                go.placed_before_first_failure() as f64,
                0,
            );
        }
        if let Some((ours, go)) = &c.topology {
            print_topology(ours, go);
        }
        println!(
            "  controller's path: {:.0} claims/s, p50 {:.1} us, p99 {:.1} us per claim, {} placed",
            claims_per_second(&c.best_fit),
            percentile_us(&c.best_fit, 0.50),
            percentile_us(&c.best_fit, 0.99),
            c.best_fit.placed()
        );
        let e = &c.events;
        println!(
            "  one event: node republishes p50 {:.0} us / p99 {:.0} us; claim arrives p99 {:.1} us, goes p99 {:.1} us; build from scratch {:.0} ms",
            percentile_of(&e.republish_node, 0.50),
            percentile_of(&e.republish_node, 0.99),
            percentile_of(&e.claim_arrives, 0.99),
            percentile_of(&e.claim_goes, 0.99),
            e.build.as_secs_f64() * 1e3
        );
        println!(
            "  ours: Allocator::new {:.0} ms (once, at start); {} allocations of ours replayed under Go: all accepted",
            c.ours_setup.as_secs_f64() * 1e3,
            c.validated
        );
    }
}

fn print_topology(ours: &TopologyRun, go: &TopologyRun) {
    let share = TopologyRun::share;
    row("topology: claims placed", ours.placed as f64, go.placed as f64, 0);
    row(
        "  on one NUMA node (%)",
        share(ours.one_numa_node, ours.placed),
        share(go.one_numa_node, go.placed),
        1,
    );
    row(
        "  ... where the node had room (%)",
        share(ours.had_room_one_numa_node, ours.had_room),
        share(go.had_room_one_numa_node, go.had_room),
        1,
    );
    row(
        "  nodes in use (mean)",
        ours.mean_nodes_in_use(),
        go.mean_nodes_in_use(),
        2,
    );
    println!(
        "  topology: 16 nodes x 8 H100 (NUMA 0: cards 0-3, NUMA 1: cards 4-7, two PCIe roots, one NVLink domain), 300 claims of 2 or 4 cards, ~30 alive; packing {}",
        if ours.mean_nodes_in_use() <= go.mean_nodes_in_use() {
            "held (ours uses no more nodes than Go)"
        } else {
            "NOT held: ours uses more nodes than Go"
        }
    );
}
