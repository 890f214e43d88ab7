//! A preemption survives a change of gpu-dra-controller's leader (issue 34, item 1): the new
//! leader reads the preemptor's `status.nominatedNodeName` back, as the kube-scheduler's
//! `PodEligibleToPreemptOthers` does, and waits for the victims the old leader evicted instead
//! of preempting a second time; the freed card still goes to the preemptor.
//!
//! A node of two A30s full of priority-0 MIG Pods. A priority-1000 Pod that needs a whole card
//! makes the first controller evict the four Pods of one card, which then stay terminating (no
//! kubelet removes them yet). That controller stops; a second one, under another identity, takes
//! the lease. While the victims still terminate, a priority-0 Pod that would fit on the freed card
//! arrives. The new leader evicts nothing, counts no preemption and tells no one of one; once the
//! victims are gone, the preemptor gets the card and the priority-0 Pod does not.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::{Api, ResourceExt};
use support::components::AgentWorkspace;
use support::dra_controller_run::*;
use support::preemption_bed::*;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_waits_for_the_victims_of_the_old_one() {
    let ns = TestNamespace::create("dra-preemption-failover").await.unwrap();
    let node = ReadyNode::register(&ns, "a30x2", BTreeMap::new()).await.unwrap();
    let node = node.name().to_owned();
    let client = ns.client();
    publish_two_a30(&ns, &node).await;
    mig_and_whole_templates(&ns).await;
    let priorities = Api::<PriorityClass>::all(client.clone());
    let high = create(&priorities, &priority_class(&ns, "high", 1000, "PreemptLowerPriority")).await;
    let ws = AgentWorkspace::new();
    let kubeconfig = dra_controller_kubeconfig(&ns, &ws).await;
    let (first, first_port) = start_dra_controller_with(&ns, &ws, &kubeconfig, &[]).await;

    let pods = ns.api::<Pod>();
    let by_card = mig_pods_on_every_slot(&ns, &node, |_| "2026-01-01T00:00:00Z").await;

    create(&pods, &gated("trainer", &node, "whole", Some(&high.name_any()))).await;
    let victims = evicted(&ns, 4).await;
    assert!(
        by_card.values().any(|pods| *pods == victims),
        "one card's Pods: {victims:?}"
    );
    let freed = card_of(&ns, victims.first().unwrap()).await;
    nominated(&ns, "trainer", &node).await;
    preemptions_counted(first_port, 1).await;
    drop(first);

    // Another identity: a takeover, not the same leader coming back.
    let second_ws = AgentWorkspace::new();
    let identity = [("POD_NAME", "gpu-dra-controller-1".to_owned())];
    let (_second, second_port) = start_dra_controller_with(&ns, &second_ws, &kubeconfig, &identity).await;
    // Served after the preemptor in every round (lower priority): once its Event is there, the
    // new leader has had the preemptor in a round.
    create(&pods, &gated("thief", &node, "mig", None)).await;
    let told = event_whose_note(&ns, "thief", "CannotAllocate", WAIT, |_| true).await;
    assert!(told.note.is_some(), "{told:?}");
    wait_until("the new leader's metrics", Duration::from_secs(30), || async {
        Ok(match preemption_lines(second_port) {
            Ok(lines) => Progress::Done(lines),
            Err(error) => Progress::Pending(error.to_string()),
        })
    })
    .await
    .map(|lines| {
        assert!(
            !lines.iter().any(|l| l.contains(r#"outcome="evicted""#)),
            "the new leader preempted again: {lines:?}"
        )
    })
    .unwrap();
    assert_eq!(terminating(&ns).await, victims, "nothing more evicted");
    let preempting = events_about(&ns, "trainer", "Preempting").await.unwrap();
    let told: i32 = preempting
        .iter()
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert_eq!(told, 1, "one preemption, told once: {preempting:?}");

    kubelet_removes(&ns, &victims).await;
    bound_pod(&ns, "trainer").await;
    assert_eq!(
        card_of(&ns, "trainer").await,
        freed,
        "the freed card went to the preemptor"
    );
    let thief = pods.get("thief").await.unwrap();
    assert!(
        thief.spec.unwrap().node_name.is_none(),
        "the thief never got the freed card"
    );
}
