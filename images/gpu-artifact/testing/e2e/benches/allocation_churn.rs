//! `make bench`: best fit for ordinary Pods against the scheduler alone, through the real scheduler
//! and the real gpu-dra-controller process (issue 16, item 3). The churn of the e2e test
//! `dra_controller_churn` (claims of mixed MIG sizes of a class whole cards and partitions both
//! satisfy, arrivals and departures from one seed) runs on a node of four H100 cards, once with
//! the scheduler alone and once with every Pod gated. It prints how many Pods each placed before
//! the first it could not, and what the gate costs a Pod's start: the time from its creation to
//! its binding, gated beside ungated (the baseline), from the same runs. Times are seen by polling
//! every 100 ms.

#[path = "../tests/churn/mod.rs"]
mod churn;
#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use churn::{ChurnNode, churn_plan};
use support::components::AgentWorkspace;
use support::dra_controller_run::start_dra_controller;
use testbed::TestNamespace;

const CARDS: usize = 4;
const PLAN_SEED: u64 = 2026;
const STEPS: usize = 400;

fn at(waits: &[Duration], p: f64) -> Duration {
    let mut sorted = waits.to_vec();
    sorted.sort();
    sorted
        .get(((sorted.len().max(1) - 1) as f64 * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let ns = TestNamespace::create("bench-churn").await.unwrap();
    let minor = ns.cluster().server_minor().await.unwrap();
    let templates = churn::any_gpu_templates(&ns).await;
    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;
    let log = || controller.log();
    let plan = churn_plan(PLAN_SEED, STEPS, 8, 3);
    let alone_node = ChurnNode::publish(&ns, "alone", CARDS, minor >= 35).await;
    let alone = churn::run(&ns, &alone_node, &templates, false, &plan, &log).await;
    let best_node = ChurnNode::publish(&ns, "bestfit", CARDS, minor >= 35).await;
    let best = churn::run(&ns, &best_node, &templates, true, &plan, &log).await;

    println!(
        "allocation churn (Kubernetes 1.{minor}; one node of {CARDS} H100 with every MIG placement, seed {PLAN_SEED})"
    );
    println!(
        "  placed before the first failure: scheduler alone {}, best fit (gated) {}: {:.2}x",
        alone.placed,
        best.placed,
        best.placed as f64 / alone.placed.max(1) as f64
    );
    println!("    scheduler alone stopped at: {}", alone.failure);
    println!("    best fit stopped at: {}", best.failure);
    for (what, p) in [("p50", 0.5), ("p90", 0.9)] {
        let (ungated, gated) = (at(&alone.waits, p), at(&best.waits, p));
        println!(
            "  creation to binding {what}: ungated {ungated:>8.0?} (baseline), gated {gated:>8.0?}: {:.2}x, +{:.0?}",
            gated.as_secs_f64() / ungated.as_secs_f64().max(1e-3),
            gated.saturating_sub(ungated)
        );
    }
    drop(controller);
}
