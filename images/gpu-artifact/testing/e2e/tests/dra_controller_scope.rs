//! gpu-dra-controller's Pod patches (issue 17, item 6): RBAC grants it `patch` on every Pod so it can
//! remove its scheduling gate; the chart's ValidatingAdmissionPolicy, as `helm` renders it, keeps
//! that patch to exactly the removal of `gpu.deckhouse.io/allocation`. The test writes as the
//! controller's account with its RBAC, in the shape the controller writes (a merge patch of
//! `spec.schedulingGates` with the other gates kept): the removal passes, and every other change a
//! Pod update allows is refused by the real API server with the policy's message, while an admin's
//! writes stay untouched.

mod support;

use claim_allocation::selection::SCHEDULING_GATE;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::components::dra_controller_rules;
use support::policies::{install_rendered_policies, refused, until_refused};
use support::*;
use testbed::{Access, TestNamespace};

const OTHER_GATE: &str = "example.com/quota";

async fn gated_pod(ns: &TestNamespace, name: &str, gates: &[&str]) -> Pod {
    let gates: Vec<Value> = gates.iter().map(|g| json!({"name": g})).collect();
    let mut pod = pod(name, "no-node", json!({}), json!({"schedulingGates": gates}));
    pod.metadata.labels = Some([("app".to_owned(), name.to_owned())].into());
    create(&ns.api::<Pod>(), &pod).await
}

/// The controller's patch: `gates` left, and `more` merged beside them.
async fn patch_as(client: &Client, ns: &TestNamespace, pod: &str, gates: &[&str], more: Value) -> kube::Result<Pod> {
    let gates: Vec<Value> = gates.iter().map(|g| json!({"name": g})).collect();
    let mut patch = more;
    patch["spec"]["schedulingGates"] = json!(gates);
    Api::<Pod>::namespaced(client.clone(), ns.name())
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn gates_of(pod: &Pod) -> Vec<String> {
    let gates = pod.spec.as_ref().and_then(|s| s.scheduling_gates.clone());
    gates.unwrap_or_default().into_iter().map(|g| g.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_may_only_remove_its_own_scheduling_gate() {
    let ns = TestNamespace::create("dra-pod-patches").await.unwrap();
    let controller = ns
        .client_as("gpu-dra-controller", Access::Cluster(dra_controller_rules()))
        .await
        .unwrap();
    let installed = install_rendered_policies(&ns, "gpu-dra-controller-pod-patches").await;
    assert_eq!(installed, 1, "the chart renders one policy (its binding has its name)");

    gated_pod(&ns, "probe", &[SCHEDULING_GATE]).await;
    let pods = ns.api::<Pod>();
    until_refused("the Pod-patch policy", "gpu-dra-controller may", || async {
        patch_as(
            &controller,
            &ns,
            "probe",
            &[SCHEDULING_GATE],
            json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .await?;
        let undo = json!({"metadata": {"labels": {"x": null}}});
        pods.patch("probe", &PatchParams::default(), &Patch::Merge(&undo))
            .await?;
        Ok(())
    })
    .await;

    // What the controller does: its gate removed, the others kept.
    gated_pod(&ns, "ours", &[SCHEDULING_GATE, OTHER_GATE]).await;
    let ungated = patch_as(&controller, &ns, "ours", &[OTHER_GATE], json!({}))
        .await
        .unwrap();
    assert_eq!(gates_of(&ungated), vec![OTHER_GATE.to_owned()]);

    // Anything else is refused, and the Pod keeps what it had.
    let theirs = gated_pod(&ns, "theirs", &[SCHEDULING_GATE, OTHER_GATE]).await;
    // The stored containers with another image: the one change to them a Pod update allows.
    let mut containers = json!(theirs.spec.map(|s| s.containers).unwrap_or_default());
    containers[0]["image"] = json!("registry.invalid/other:1");
    let cases: [(&str, &[&str], Value, &str); 6] = [
        (
            "removing another gate",
            &[SCHEDULING_GATE],
            json!({}),
            "keeping its other gates",
        ),
        ("removing every gate", &[], json!({}), "keeping its other gates"),
        (
            "labelling",
            &[OTHER_GATE],
            json!({"metadata": {"labels": {"app": "moved"}}}),
            "labels, annotations",
        ),
        (
            "annotating",
            &[OTHER_GATE],
            json!({"metadata": {"annotations": {"a": "b"}}}),
            "labels, annotations",
        ),
        (
            "steering the gated Pod",
            &[OTHER_GATE],
            json!({"spec": {"nodeSelector": {"example.com/zone": "elsewhere"}}}),
            "node selector",
        ),
        (
            "changing an image",
            &[OTHER_GATE],
            json!({"spec": {"containers": containers}}),
            "images",
        ),
    ];
    for (what, gates, more, says) in cases {
        refused(patch_as(&controller, &ns, "theirs", gates, more).await, what, says);
    }
    let kept = pods.get("theirs").await.unwrap();
    assert_eq!(gates_of(&kept), vec![SCHEDULING_GATE.to_owned(), OTHER_GATE.to_owned()]);
    assert_eq!(
        kept.metadata.labels.unwrap_or_default().get("app").map(String::as_str),
        Some("theirs")
    );

    // A Pod without our gate is not the controller's to touch.
    gated_pod(&ns, "foreign", &[OTHER_GATE]).await;
    refused(
        patch_as(&controller, &ns, "foreign", &[], json!({})).await,
        "ungating a Pod it never gated",
        "may only remove scheduling gate",
    );

    // The policy binds the controller only: an admin still edits the same Pod.
    let relabel = json!({"metadata": {"labels": {"app": "admin-moved"}}});
    pods.patch("theirs", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .unwrap();
}
