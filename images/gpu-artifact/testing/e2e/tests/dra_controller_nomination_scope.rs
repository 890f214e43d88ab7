//! gpu-dra-controller's Pod status writes (issue 34, item 1): after it evicts a preemptor's victims it
//! nominates the preemptor to their node in `status.nominatedNodeName`, as the kube-scheduler does.
//! RBAC can grant only `patch` on the whole `pods/status`; the chart's ValidatingAdmissionPolicy, as
//! `helm` renders it, keeps that write to the one field. The test writes as the controller's account
//! with its RBAC: the controller's own nomination (`ClaimWrites::nominate`) is stored, and every other
//! status or metadata change through the status is refused by the real API server with the policy's
//! message, while an admin's status writes stay untouched.

mod support;

use claim_allocation::claim_writes::ClaimWrites;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::components::dra_controller_rules;
use support::policies::{install_rendered_policies, refused, until_refused};
use support::*;
use testbed::{Access, TestNamespace};

async fn status_patch_as(client: &Client, ns: &TestNamespace, pod: &str, patch: Value) -> kube::Result<Pod> {
    Api::<Pod>::namespaced(client.clone(), ns.name())
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
}

fn nominated(pod: &Pod) -> Option<&str> {
    pod.status.as_ref()?.nominated_node_name.as_deref()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_may_only_nominate_a_pod_in_its_status() {
    let ns = TestNamespace::create("dra-nominations").await.unwrap();
    let controller = ns
        .client_as("gpu-dra-controller", Access::Cluster(dra_controller_rules()))
        .await
        .unwrap();
    let installed = install_rendered_policies(&ns, "gpu-dra-controller-pod-nominations").await;
    assert_eq!(installed, 1, "the chart renders one policy (its binding has its name)");
    let pods = ns.api::<Pod>();
    let gates = json!({"schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}]});
    let preemptor = create(&pods, &pod("preemptor", "no-node", json!({}), gates)).await;
    until_refused("the nomination policy", "gpu-dra-controller may", || async {
        status_patch_as(&controller, &ns, "preemptor", json!({"status": {"message": "x"}})).await?;
        let undo = json!({"status": {"message": null}});
        pods.patch_status("preemptor", &PatchParams::default(), &Patch::Merge(&undo))
            .await?;
        Ok(())
    })
    .await;

    // What the controller writes once it evicted the victims.
    let writes = ClaimWrites {
        client: &controller,
        fence: None,
    };
    writes.nominate(&preemptor, "w1").await.unwrap();
    let stored = pods.get("preemptor").await.unwrap();
    assert_eq!(nominated(&stored), Some("w1"));

    // Anything else through the status is refused, and the Pod keeps what it had.
    let cases: [(&str, Value, &str); 5] = [
        (
            "failing the Pod",
            json!({"status": {"phase": "Failed"}}),
            "only set the nominated node",
        ),
        (
            "a condition",
            json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}}),
            "only set the nominated node",
        ),
        (
            "a message beside the nomination",
            json!({"status": {"nominatedNodeName": "w2", "message": "moved"}}),
            "only set the nominated node",
        ),
        (
            "labelling through the status",
            json!({"metadata": {"labels": {"app": "moved"}}}),
            "labels",
        ),
        (
            "annotating through the status",
            json!({"metadata": {"annotations": {"a": "b"}}}),
            "annotations",
        ),
    ];
    for (what, patch, says) in cases {
        refused(status_patch_as(&controller, &ns, "preemptor", patch).await, what, says);
    }
    let kept = pods.get("preemptor").await.unwrap();
    assert_eq!(nominated(&kept), Some("w1"));
    assert_eq!(kept.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Pending"));
    assert!(kept.metadata.annotations.unwrap_or_default().is_empty());

    // A new nomination alone passes; the policy binds the controller only: an admin writes the rest.
    writes.nominate(&preemptor, "w2").await.unwrap();
    assert_eq!(nominated(&pods.get("preemptor").await.unwrap()), Some("w2"));
    let admin = json!({"status": {"message": "an admin's note"}});
    pods.patch_status("preemptor", &PatchParams::default(), &Patch::Merge(&admin))
        .await
        .unwrap();
}
