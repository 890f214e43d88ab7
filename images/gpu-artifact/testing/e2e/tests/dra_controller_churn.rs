//! Best fit's gain for ordinary Pods, through the real scheduler (issue 16, item 3): the same churn
//! of claims of mixed MIG sizes (a class whole cards and partitions both satisfy), arrivals and
//! departures, runs twice on a node of two H100 cards offering the whole card and every MIG
//! placement: once with the scheduler alone, whose allocator takes the first
//! device that fits, and once with the Pods gated, so gpu-dra-controller allocates them best fit
//! and the scheduler binds them. Best fit must place at least 1.1x as many Pods before the first
//! that cannot be placed. The first run's node stays, so the second also shows that a gated Pod's
//! claim goes only to a node the Pod may run on (its node selector names the second node).

mod churn;
mod support;

use churn::{ChurnNode, Step, churn_plan};
use support::components::AgentWorkspace;
use support::dra_controller_run::start_dra_controller;
use testbed::TestNamespace;

const CARDS: usize = 2;
const PLAN_SEED: u64 = 16;
const STEPS: usize = 120;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_fit_places_more_of_a_mig_churn_than_the_scheduler_alone() {
    let ns = TestNamespace::create("churn").await.unwrap();
    let split_layout = ns.cluster().server_minor().await.unwrap() >= 35;
    let templates = churn::any_gpu_templates(&ns).await;
    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;
    let plan = churn_plan(PLAN_SEED, STEPS, 6, 3);

    let alone_node = ChurnNode::publish(&ns, "alone", CARDS, split_layout).await;
    let log = || controller.log();
    let alone = churn::run(&ns, &alone_node, &templates, false, &plan, &log).await;
    let best_node = ChurnNode::publish(&ns, "bestfit", CARDS, split_layout).await;
    let best = churn::run(&ns, &best_node, &templates, true, &plan, &log).await;

    let summary = format!(
        "scheduler alone placed {} (devices {:?}; stopped at {}; waits {:?})\n\
         best fit placed {} (devices {:?}; stopped at {}; waits {:?})",
        alone.placed, alone.devices, alone.failure, alone.waits, best.placed, best.devices, best.failure, best.waits
    );
    println!("{summary}");
    assert!(alone.placed > 0, "the churn must place some Pods to compare: {summary}");
    assert!(
        best.placed as f64 >= 1.1 * alone.placed as f64,
        "best fit must place at least 1.1x as many: {summary}\n--- controller log ---\n{}",
        controller.log()
    );
    let own_pool = format!("gpus/{}/", best_node.node.name());
    assert!(best.devices.iter().all(|d| d.starts_with(&own_pool)), "{summary}");
}

#[test]
fn a_churn_plan_never_departs_more_than_arrived_and_is_the_same_for_a_seed() {
    let plan = churn_plan(7, 400, 5, 3);
    assert_eq!(plan, churn_plan(7, 400, 5, 3));
    let mut placed = 0i64;
    for step in &plan {
        placed += if matches!(step, Step::Arrive(_)) { 1 } else { -1 };
        assert!(placed >= 0);
    }
    assert!(plan.iter().any(|s| matches!(s, Step::Depart(_))));
    assert!(plan[..5].iter().all(|s| matches!(s, Step::Arrive(_))));
}
