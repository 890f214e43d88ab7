//! `make bench`: what priority preemption costs a Pod's start (issue 34, item 1), through the real
//! scheduler and the real gpu-dra-controller process. A priority-1000 Pod that needs a whole A30 is
//! created on a node of two A30s full of priority-0 MIG Pods (it preempts the four of one card),
//! and the same Pod on an empty node of the same shape: the time from its creation to its binding
//! (its claim allocated, its gate lifted, the scheduler bound it), each over the same rounds of one
//! run, and their ratio. No kubelet runs the Pods: the bench removes a Pod an eviction marked for
//! deletion as soon as it sees it (polling every 50 ms), so the victims' grace period, which a real
//! node spends stopping containers, is not in the figure. Times are seen by polling.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::{Api, ResourceExt};
use support::components::AgentWorkspace;
use support::dra_controller_run::start_dra_controller;
use support::preemption_bed::*;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

const ROUNDS: usize = 5;
const POLL: Duration = Duration::from_millis(50);

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// Waits until no claim made for `pod` is left (kube-controller-manager deletes a Pod's template
/// claims once it is gone): its card is free again.
async fn claims_gone(ns: &TestNamespace, pod: &str) {
    let prefix = format!("{pod}-gpu-");
    wait_until(&format!("{pod}'s claims gone"), WAIT, || async {
        let left = claims(ns)
            .await
            .into_iter()
            .filter(|c| c.name_any().starts_with(&prefix))
            .count();
        Ok(if left == 0 {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{left} left"))
        })
    })
    .await
    .unwrap();
}

/// Creates gated priority-0 MIG Pods `names` on `node` and waits until each is bound and Running.
async fn fill(ns: &TestNamespace, node: &str, names: &[String]) {
    let pods = ns.api::<Pod>();
    for name in names {
        create(&pods, &gated(name, node, "mig", None)).await;
        bound_pod(ns, name).await;
        running(ns, name, "2026-01-01T00:00:00Z").await;
    }
}

/// Creates the preemptor `name` on `node` and plays the kubelet until the scheduler binds it;
/// returns the time from its creation to its binding.
async fn start_of(ns: &TestNamespace, name: &str, node: &str, class: &str) -> Duration {
    let pods = ns.api::<Pod>();
    let started = Instant::now();
    create(&pods, &gated(name, node, "whole", Some(class))).await;
    loop {
        let marked = terminating(ns).await;
        if !marked.is_empty() {
            kubelet_removes(ns, &marked).await;
        }
        if pods.get(name).await.unwrap().spec.and_then(|s| s.node_name).is_some() {
            return started.elapsed();
        }
        assert!(started.elapsed() < WAIT, "{name} was not bound within {WAIT:?}");
        tokio::time::sleep(POLL).await;
    }
}

#[tokio::main]
async fn main() {
    let ns = TestNamespace::create("bench-preemption").await.unwrap();
    let full = ReadyNode::register(&ns, "full", BTreeMap::new()).await.unwrap();
    let empty = ReadyNode::register(&ns, "empty", BTreeMap::new()).await.unwrap();
    let (full, empty) = (full.name().to_owned(), empty.name().to_owned());
    for node in [&full, &empty] {
        publish_two_a30(&ns, node).await;
    }
    mig_and_whole_templates(&ns).await;
    let high = priority_class(&ns, "high", 1000, "PreemptLowerPriority");
    let high = create(&Api::<PriorityClass>::all(ns.client()), &high).await.name_any();
    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;

    let mut alone = vec![];
    for round in 0..ROUNDS {
        let name = format!("alone-{round}");
        alone.push(start_of(&ns, &name, &empty, &high).await);
        kubelet_removes(&ns, &BTreeSet::from([name.clone()])).await;
        claims_gone(&ns, &name).await;
    }
    let names = |prefix: &str| (0..4).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    fill(&ns, &full, &names("low-a")).await;
    fill(&ns, &full, &names("low-b")).await;
    let mut preempting = vec![];
    for round in 0..ROUNDS {
        let name = format!("trainer-{round}");
        preempting.push(start_of(&ns, &name, &full, &high).await);
        kubelet_removes(&ns, &BTreeSet::from([name.clone()])).await;
        claims_gone(&ns, &name).await;
        fill(&ns, &full, &names(&format!("low-{round}"))).await;
    }
    let (alone, preempting) = (median(&alone), median(&preempting));
    println!("priority preemption (one node of two A30s full of priority-0 MIG Pods, four per card; {ROUNDS} rounds)");
    println!(
        "  creation to binding, median: on an empty node {alone:>8.0?} (baseline), preempting four Pods {preempting:>8.0?}: {:.2}x, +{:.0?}",
        preempting.as_secs_f64() / alone.as_secs_f64().max(1e-3),
        preempting.saturating_sub(alone)
    );
    drop(controller);
}
