//! A claim gpu-dra-controller allocates lives as one the kube-scheduler allocates (issue 31, item 3):
//! it carries `resource.kubernetes.io/delete-protection` before its allocation is written, so the
//! real kube-controller-manager deallocates it when its Pod is done, and a user's delete of it
//! waits while a Pod still runs on its card. On a node with one A30 (the real gpu-handler, the
//! kubelet simulator calling it over the real sockets), the card is never prepared for two claims:
//! a second Pod waits until the first one's claim is gone, then gets the card. A claim its Pods left
//! is not allocated again ahead of a Pod (the standalone-claim rule of `selection`).

mod handler_node;
mod plugin_node;
mod support;

use std::time::Duration;

use claim_allocation::claim_writes::DELETE_PROTECTION;
use claim_allocation::selection::SCHEDULING_GATE;
use host_fixtures::NamedHost;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use plugin_node::PluginNode;
use serde_json::json;
use support::components::AgentWorkspace;
use support::dra_controller_run::{claim_when, event_whose_note, start_dra_controller};
use support::*;
use testbed::{Progress, TestNamespace, wait_until};

fn claim(name: &str, class: &str) -> ResourceClaim {
    serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}))
    .unwrap()
}

/// A Pod with our gate on `node` that uses the claim `claim`.
fn gated_pod(name: &str, node: &str, claim: &str) -> Pod {
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                      "schedulingGates": [{"name": SCHEDULING_GATE}]});
    pod(name, node, json!({"claims": [{"name": "gpu"}]}), uses)
}

fn finalizers(claim: &ResourceClaim) -> Vec<String> {
    claim.metadata.finalizers.clone().unwrap_or_default()
}

fn reserved_for(claim: &ResourceClaim) -> Vec<String> {
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.clone());
    reserved.unwrap_or_default().into_iter().map(|r| r.name).collect()
}

/// Who wrote the claim's finalizers, by managedFields.
fn finalizer_writers(claim: &ResourceClaim) -> Vec<String> {
    let entries = claim.managed_fields().iter();
    let writes = |m: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        m.fields_v1
            .as_ref()
            .is_some_and(|f| f.0.get("f:metadata").and_then(|m| m.get("f:finalizers")).is_some())
    };
    entries.filter(writes).filter_map(|m| m.manager.clone()).collect()
}

/// Reports the Pod's containers exited, as the kubelet does.
async fn pod_succeeded(ns: &TestNamespace, name: &str) {
    let done = json!({"status": {"phase": "Succeeded"}});
    ns.api::<Pod>()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
}

async fn prepare_failures(ns: &TestNamespace) -> Vec<String> {
    let events = ns.api::<Event>().list(&ListParams::default()).await.unwrap();
    events
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref().is_some_and(|r| r.contains("PrepareFailed")))
        .map(|e| e.note.unwrap_or_default())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_the_controller_allocates_is_deallocated_and_deleted_as_the_schedulers_are() {
    let node = PluginNode::start("claim-lifecycle", NamedHost::A30Pcie, &[]).await;
    let ns = &node.s.ns;
    let name = node.s.node.name().to_owned();
    let class = create(
        &Api::<DeviceClass>::all(ns.client()),
        &device_type_class(ns, "physical", "Physical"),
    )
    .await
    .name_any();
    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(ns, &ws).await;
    let claims = ns.api::<ResourceClaim>();
    let pods = ns.api::<Pod>();

    // 1. The controller allocates `first` for the gated Pod `p1`: the finalizer comes first, written
    //    by the controller; the scheduler binds the Pod and reserves the claim; the node prepares it.
    create(&claims, &claim("first", &class)).await;
    create(&pods, &gated_pod("p1", &name, "first")).await;
    node.wait_prepared("p1").await;
    let first = claim_when(&claims, "first", "allocated and reserved for p1", |c| {
        allocated_devices(c).len() == 1 && reserved_for(c) == ["p1"]
    })
    .await;
    assert_eq!(finalizers(&first), [DELETE_PROTECTION], "the scheduler's finalizer");
    assert_eq!(
        finalizer_writers(&first),
        ["gpu-dra-controller"],
        "added by the controller, before the scheduler saw the claim"
    );
    let first_uid = first.uid().unwrap();
    assert_eq!(node.checkpointed_claims(), std::slice::from_ref(&first_uid));

    // 2. A user deletes `first` while p1 runs on its card: the delete waits for the Pod.
    claims.delete("first", &DeleteParams::default()).await.unwrap();
    let deleting = claims
        .get_opt("first")
        .await
        .unwrap()
        .expect("a claim in use is not removed while its Pod runs");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert_eq!(
        allocated_devices(&deleting),
        allocated_devices(&first),
        "it keeps its card while deleted"
    );

    // 3. A second claim for the same card finds it taken: it waits, and nothing is prepared for it.
    create(&claims, &claim("second", &class)).await;
    create(&pods, &gated_pod("p2", &name, "second")).await;
    let pool = format!("gpus/{name}");
    event_whose_note(ns, "second", "CannotAllocate", Duration::from_secs(30), |_| true).await;
    assert!(allocated_devices(&claims.get("second").await.unwrap()).is_empty());
    assert_eq!(
        node.checkpointed_claims(),
        std::slice::from_ref(&first_uid),
        "the card serves one claim"
    );

    // 4. p1 ends (deleted; the node releases its claims first): kube-controller-manager deallocates
    //    `first` and lifts its finalizer, the delete completes, and p2 gets the card.
    pods.delete("p1", &DeleteParams::default()).await.unwrap();
    node.wait_pod_gone("p1").await;
    wait_until("claim first gone", Duration::from_secs(60), || async {
        Ok(match claims.get_opt("first").await? {
            None => Progress::Done(()),
            Some(c) => Progress::Pending(format!(
                "finalizers {:?}, reserved for {:?}",
                finalizers(&c),
                reserved_for(&c)
            )),
        })
    })
    .await
    .unwrap();
    node.wait_prepared("p2").await;
    let second = claim_when(&claims, "second", "allocated for p2", |c| reserved_for(c) == ["p2"]).await;
    assert_eq!(allocated_devices(&second), vec![(pool.clone(), "gpu0".to_owned())]);
    assert_eq!(finalizers(&second), [DELETE_PROTECTION]);
    assert_eq!(node.checkpointed_claims(), [second.uid().unwrap()]);
    assert_eq!(
        prepare_failures(ns).await,
        Vec::<String>::new(),
        "no prepare was refused"
    );

    // 5. p2's containers exit: kube-controller-manager deallocates `second`, which stays (a
    //    standalone claim outlives its Pods), unallocated and without the finalizer.
    pod_succeeded(ns, "p2").await;
    let released = claim_when(&claims, "second", "deallocated by kube-controller-manager", |c| {
        allocated_devices(c).is_empty() && reserved_for(c).is_empty() && finalizers(c).is_empty()
    })
    .await;
    assert!(released.metadata.deletion_timestamp.is_none());

    // 6. p2 is gone and `second` is used by nobody: nobody allocates it ahead of a Pod (it would hold
    //    the card again), and the next Pod's claim gets the card.
    pods.delete("p2", &DeleteParams::default()).await.unwrap();
    node.wait_pod_gone("p2").await;
    create(&claims, &claim("third", &class)).await;
    create(&pods, &gated_pod("p3", &name, "third")).await;
    let holders = wait_until("the card allocated again", Duration::from_secs(30), || async {
        let holders: Vec<String> = claims
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|c| !allocated_devices(c).is_empty())
            .map(|c| c.name_any())
            .collect();
        Ok(match holders.is_empty() {
            true => Progress::Pending("no claim holds the card".into()),
            false => Progress::Done(holders),
        })
    })
    .await
    .unwrap();
    assert_eq!(holders, ["third"], "a claim no Pod uses is not allocated ahead");
    node.wait_prepared("p3").await;
    drop(controller);
}
