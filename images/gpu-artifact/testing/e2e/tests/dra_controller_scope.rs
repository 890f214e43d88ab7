//! gpu-dra-controller's Pod patches (issue 17, item 6): RBAC grants it `patch` on every Pod so it can
//! remove its scheduling gate; the chart's ValidatingAdmissionPolicy, as `helm` renders it, keeps
//! that patch to exactly the removal of `gpu.deckhouse.io/allocation`. The test writes as the
//! controller's account with its RBAC, in the shape the controller writes (a merge patch of
//! `spec.schedulingGates` with the other gates kept): the removal passes, and every other change a
//! Pod update allows is refused by the real API server with the policy's message, while an admin's
//! writes stay untouched. Likewise its claim patches (issue 31, item 3): RBAC grants `patch` on
//! claims so it can add kube-scheduler's finalizer before an allocation, and the chart's policy
//! keeps that patch to exactly adding `resource.kubernetes.io/delete-protection`.

mod support;

use claim_allocation::claim_writes::{DELETE_PROTECTION, finalizer_patch};
use claim_allocation::selection::SCHEDULING_GATE;
use gpu_api::labels::ALLOCATION_GATE_LABEL;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use support::components::dra_controller_rules;
use support::policies::{install_rendered_policies, refused, until_refused};
use support::*;
use testbed::{Access, TestNamespace};

const OTHER_GATE: &str = "example.com/quota";
const OTHER_FINALIZER: &str = "example.com/keep";

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

    // What the controller does: its gate removed, the others kept, and the gate's label taken off.
    gated_pod(&ns, "ours", &[SCHEDULING_GATE, OTHER_GATE]).await;
    let label = json!({"metadata": {"labels": {ALLOCATION_GATE_LABEL: "true"}}});
    pods.patch("ours", &PatchParams::default(), &Patch::Merge(&label))
        .await
        .unwrap();
    let unlabel = json!({"metadata": {"labels": {ALLOCATION_GATE_LABEL: null}}});
    let ungated = patch_as(&controller, &ns, "ours", &[OTHER_GATE], unlabel)
        .await
        .unwrap();
    assert_eq!(gates_of(&ungated), vec![OTHER_GATE.to_owned()]);
    assert_eq!(
        ungated.labels().clone(),
        [("app".to_owned(), "ours".to_owned())].into(),
        "the gate's label off, the others kept"
    );

    // Anything else is refused, and the Pod keeps what it had.
    let theirs = gated_pod(&ns, "theirs", &[SCHEDULING_GATE, OTHER_GATE]).await;
    // The stored containers with another image: the one change to them a Pod update allows.
    let mut containers = json!(theirs.spec.map(|s| s.containers).unwrap_or_default());
    containers[0]["image"] = json!("registry.invalid/other:1");
    let cases: [(&str, &[&str], Value, &str); 7] = [
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
            "labels",
        ),
        (
            "removing another label",
            &[OTHER_GATE],
            json!({"metadata": {"labels": {"app": null}}}),
            "labels",
        ),
        (
            "annotating",
            &[OTHER_GATE],
            json!({"metadata": {"annotations": {"a": "b"}}}),
            "annotations",
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

/// A claim of the test's namespace with `finalizers`, labelled `app: <name>`.
async fn claim_with(ns: &TestNamespace, name: &str, finalizers: &[&str]) -> ResourceClaim {
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "labels": {"app": name}, "finalizers": finalizers},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "any"}}]}}}))
    .unwrap();
    create(&ns.api::<ResourceClaim>(), &claim).await
}

fn finalizers_of(claim: &ResourceClaim) -> Vec<String> {
    claim.metadata.finalizers.clone().unwrap_or_default()
}

/// Claims whose finalizers a test left are released by the admin, so the namespace can go.
async fn release_claims(ns: &TestNamespace, names: &[&str]) {
    let clear = json!({"metadata": {"finalizers": null}});
    for name in names {
        ns.api::<ResourceClaim>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&clear))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_may_only_add_the_schedulers_finalizer_to_claims() {
    let ns = TestNamespace::create("dra-claim-patches").await.unwrap();
    let controller = ns
        .client_as("gpu-dra-controller", Access::Cluster(dra_controller_rules()))
        .await
        .unwrap();
    let installed = install_rendered_policies(&ns, "gpu-dra-controller-claim-finalizer").await;
    assert_eq!(installed, 1, "the chart renders one policy (its binding has its name)");
    let as_controller = Api::<ResourceClaim>::namespaced(controller.clone(), ns.name());
    let claims = ns.api::<ResourceClaim>();
    let merge = |patch: Value| Patch::Merge(patch);

    claim_with(&ns, "probe", &[]).await;
    until_refused("the claim-patch policy", "gpu-dra-controller may", || async {
        let foreign = json!({"metadata": {"finalizers": [OTHER_FINALIZER]}});
        as_controller
            .patch("probe", &PatchParams::default(), &merge(foreign))
            .await?;
        let undo = json!({"metadata": {"finalizers": null}});
        claims.patch("probe", &PatchParams::default(), &merge(undo)).await?;
        Ok(())
    })
    .await;

    // What the controller writes before an allocation: the finalizer, beside the others.
    let kept = claim_with(&ns, "kept", &[OTHER_FINALIZER]).await;
    let patch = finalizer_patch(&kept.metadata).expect("the claim lacks it");
    let added = as_controller
        .patch("kept", &PatchParams::default(), &merge(patch))
        .await
        .unwrap();
    assert_eq!(finalizers_of(&added), [OTHER_FINALIZER, DELETE_PROTECTION]);

    // Anything else is refused, and the claim keeps what it had.
    let cases: [(&str, Value); 3] = [
        (
            "removing the scheduler's finalizer",
            json!({"metadata": {"finalizers": [OTHER_FINALIZER]}}),
        ),
        (
            "removing another finalizer",
            json!({"metadata": {"finalizers": [DELETE_PROTECTION]}}),
        ),
        (
            "adding another finalizer",
            json!({"metadata": {"finalizers": [OTHER_FINALIZER, DELETE_PROTECTION, "example.com/more"]}}),
        ),
    ];
    for (what, patch) in cases {
        refused(
            as_controller
                .patch("kept", &PatchParams::default(), &merge(patch))
                .await,
            what,
            "may only add the finalizer",
        );
    }
    let bare = claim_with(&ns, "bare", &[]).await;
    let beside: [(&str, Value); 2] = [
        ("labelling", json!({"labels": {"app": "moved"}})),
        ("annotating", json!({"annotations": {"a": "b"}})),
    ];
    for (what, more) in beside {
        let mut patch = finalizer_patch(&bare.metadata).unwrap();
        patch["metadata"]
            .as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        refused(
            as_controller
                .patch("bare", &PatchParams::default(), &merge(patch))
                .await,
            &format!("adding the finalizer and {what}"),
            "labels, annotations",
        );
    }
    let kept = claims.get("kept").await.unwrap();
    assert_eq!(finalizers_of(&kept), [OTHER_FINALIZER, DELETE_PROTECTION]);
    assert_eq!(kept.labels().get("app").map(String::as_str), Some("kept"));
    assert_eq!(finalizers_of(&claims.get("bare").await.unwrap()), Vec::<String>::new());

    // The policy binds the controller only: an admin still edits the same claim.
    let relabel = json!({"metadata": {"labels": {"app": "admin-moved"}}});
    claims
        .patch("kept", &PatchParams::default(), &merge(relabel))
        .await
        .unwrap();
    release_claims(&ns, &["kept"]).await;
}
