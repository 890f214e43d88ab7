//! Priority preemption for gated Pods (issue 34, item 1) through the real gpu-dra-controller
//! process under its RBAC, on the real control plane. A node of two A30s full of priority-0 MIG
//! Pods (four per card); then, one phase after another (one controller acts cluster-wide):
//! 1. a priority-1000 Pod with `preemptionPolicy: Never` and a priority-0 Pod (equal to the
//!    holders) preempt nothing;
//! 2. a priority-1000 Pod that needs a whole card: the Pods of the card upstream's order picks are
//!    protected by a PodDisruptionBudget, so exactly the four Pods of the other card are evicted;
//!    a priority-0 Pod created while they terminate does not get the freed devices, the preemptor
//!    is allocated the card and bound;
//! 3. a second such Pod can only preempt the protected card: it waits, told why, and preempts once
//!    the budget is gone;
//! 4. with the switch off (`PREEMPTION=Disabled`) nothing is preempted.
//!
//! No kubelet runs the Pods: the test marks them Running (so budgets count them) and, as a kubelet
//! does once containers stopped, removes a Pod the eviction marked for deletion.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::AgentWorkspace;
use support::dra_controller_run::*;
use support::preemption_bed::*;
use support::*;
use testbed::{ReadyNode, TestNamespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gated_pods_preempt_lower_priority_gpu_holders() {
    let ns = TestNamespace::create("dra-preemption").await.unwrap();
    let node = ReadyNode::register(&ns, "a30x2", BTreeMap::new()).await.unwrap();
    let node = node.name().to_owned();
    let client = ns.client();
    publish_two_a30(&ns, &node).await;
    mig_and_whole_templates(&ns).await;
    let priorities = Api::<PriorityClass>::all(client.clone());
    let high = create(&priorities, &priority_class(&ns, "high", 1000, "PreemptLowerPriority")).await;
    let never = create(&priorities, &priority_class(&ns, "never", 1000, "Never")).await;
    let (high, never) = (high.name_any(), never.name_any());
    let ws = AgentWorkspace::new();
    let kubeconfig = dra_controller_kubeconfig(&ns, &ws).await;
    let (controller, port) = start_dra_controller_with(&ns, &ws, &kubeconfig, &[]).await;

    // The node full of priority-0 MIG Pods, four per card; those of gpu1 started later.
    let pods = ns.api::<Pod>();
    let by_card = mig_pods_on_every_slot(&ns, &node, |card| {
        if card == "gpu0" {
            "2026-01-01T00:00:00Z"
        } else {
            "2026-01-01T01:00:00Z"
        }
    })
    .await;
    assert_eq!(
        by_card.values().map(BTreeSet::len).collect::<Vec<_>>(),
        [4, 4],
        "{by_card:?}"
    );

    // 1. preemptionPolicy Never, and a Pod of the holders' priority: nothing is evicted. A third
    //    gated Pod, created after both were told they fit nowhere, is explained in a later round.
    create(&pods, &gated("patient", &node, "whole", Some(&never))).await;
    create(&pods, &gated("peer", &node, "whole", None)).await;
    one_event(&ns, "patient", "CannotAllocate").await;
    one_event(&ns, "peer", "CannotAllocate").await;
    create(&pods, &gated("marker", &node, "whole", None)).await;
    one_event(&ns, "marker", "CannotAllocate").await;
    assert_eq!(
        terminating(&ns).await,
        BTreeSet::new(),
        "Never and equal priority preempt nothing"
    );
    for pod in ["patient", "peer"] {
        assert!(events_about(&ns, pod, "Preempting").await.unwrap().is_empty(), "{pod}");
    }
    kubelet_removes(&ns, &["patient", "peer", "marker"].map(str::to_owned).into()).await;

    // 2. gpu1's Pods started last, so upstream's order would preempt them; a budget forbids it.
    for pod in &by_card["gpu1"] {
        let labels = json!({"metadata": {"labels": {"card": "gpu1"}}});
        pods.patch(pod, &PatchParams::default(), &Patch::Merge(&labels))
            .await
            .unwrap();
    }
    let budget: PodDisruptionBudget = serde_json::from_value(json!({"apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget", "metadata": {"name": "gpu1"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"card": "gpu1"}}}}))
    .unwrap();
    create(&ns.api::<PodDisruptionBudget>(), &budget).await;
    create(&pods, &gated("trainer", &node, "whole", Some(&high))).await;
    let victims = evicted(&ns, 4).await;
    assert_eq!(
        victims, by_card["gpu0"],
        "exactly the Pods of the card no budget protects"
    );
    let note = one_event(&ns, "trainer", "Preempting").await;
    // Nominated as the kube-scheduler nominates a preemptor: gpu-controller's lifter gives it longer.
    nominated(&ns, "trainer", &node).await;
    for victim in &victims {
        assert!(note.contains(victim.as_str()), "{note}");
        let preempted = one_event(&ns, victim, "Preempted").await;
        assert!(preempted.contains("trainer"), "{preempted}");
    }
    // While the victims terminate, a priority-0 Pod that would fit on the freed card arrives.
    create(&pods, &gated("thief", &node, "mig", None)).await;
    one_event(&ns, "thief", "CannotAllocate").await;
    kubelet_removes(&ns, &victims).await;
    bound_pod(&ns, "trainer").await;
    assert_eq!(
        card_of(&ns, "trainer").await,
        "gpu0",
        "the freed card went to the preemptor"
    );
    running(&ns, "trainer", "2026-01-01T02:00:00Z").await;

    // 3. Only the protected card is left: the next preemptor waits, told why.
    create(&pods, &gated("trainer-2", &node, "whole", Some(&high))).await;
    let blocked = one_event(&ns, "trainer-2", "PreemptionBlocked").await;
    assert!(blocked.contains("disruption budget"), "{blocked}");
    assert_eq!(
        terminating(&ns).await,
        BTreeSet::new(),
        "nothing evicted while it waits"
    );
    ns.api::<PodDisruptionBudget>()
        .delete("gpu1", &DeleteParams::default())
        .await
        .unwrap();
    let victims = evicted(&ns, 4).await;
    assert_eq!(victims, by_card["gpu1"]);
    kubelet_removes(&ns, &victims).await;
    bound_pod(&ns, "trainer-2").await;
    assert_eq!(card_of(&ns, "trainer-2").await, "gpu1");
    let counted = preemptions_counted(port, 2).await;
    assert!(
        counted.contains(r#"gpu_dra_preemptions_total{outcome="evicted"} 2"#),
        "{counted}"
    );
    assert!(
        counted.contains(r#"gpu_dra_preemptions_total{outcome="blocked"}"#),
        "{counted}"
    );
    let thief = pods.get("thief").await.unwrap();
    assert!(
        thief.spec.unwrap().node_name.is_none(),
        "the thief never got a freed card"
    );

    // 4. The switch off: the thief gets gpu1 once trainer-2 is gone, and a new preemptor evicts
    //    nothing; a later Pod allocated in a later round proves the controller looked.
    drop(controller);
    let off = AgentWorkspace::new();
    let disabled = [("PREEMPTION", "Disabled".to_owned())];
    let (_controller, _) = start_dra_controller_with(&ns, &off, &kubeconfig, &disabled).await;
    kubelet_removes(&ns, &["trainer-2".to_owned()].into()).await;
    bound_pod(&ns, "thief").await;
    running(&ns, "thief", "2026-01-01T03:00:00Z").await;
    create(&pods, &gated("trainer-3", &node, "whole", Some(&high))).await;
    one_event(&ns, "trainer-3", "CannotAllocate").await;
    create(&pods, &gated("marker-2", &node, "mig", None)).await;
    bound_pod(&ns, "marker-2").await;
    assert_eq!(terminating(&ns).await, BTreeSet::new(), "switched off: nothing evicted");
    assert!(events_about(&ns, "trainer-3", "Preempting").await.unwrap().is_empty());
}
