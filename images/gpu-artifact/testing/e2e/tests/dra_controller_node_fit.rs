//! gpu-dra-controller never pins a Pod to a node where it cannot run (issue 31, item 8), with the
//! real scheduler, kube-controller-manager and gpu-dra-controller under its RBAC. Two nodes, one
//! card each: the card on `busy` is the smaller one, so best fit takes it whenever the Pod may
//! run there. With `busy`'s CPU taken by a Pod bound there, a gated Pod that asks for one CPU
//! gets `free`'s card, though `busy`'s is free, and is never pinned to `busy` (the claim's watch
//! sees one allocation). Required inter-Pod anti-affinity is not judged by
//! the controller: its allocation on `busy` is undone by the scheduler's PostFilter (the claim is
//! allocated to that node alone and reserved by nobody, so it is deallocated), and the scheduler
//! then allocates the claim where the Pod can run.

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::DeleteParams;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::{Value, json};
use support::components::{AgentWorkspace, install_crds};
use support::dra_controller_run::start_dra_controller;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

fn claim(name: &str, class: &str) -> ResourceClaim {
    serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}))
    .unwrap()
}

/// A Pod gated by us, free to run on either node, using the claim of its name, asking for `cpu`;
/// `extra` adds to its spec.
fn gated(name: &str, cpu: &str, extra: Value) -> Pod {
    let mut uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
        "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}], "nodeSelector": null});
    uses.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    pod(
        name,
        "",
        json!({"claims": [{"name": "gpu"}], "requests": {"cpu": cpu}}),
        uses,
    )
}

/// A Pod put on `node` by its node name (no scheduler), asking for `cpu`, labelled `app: <name>`.
fn bound_by_hand(name: &str, node: &str, cpu: &str) -> Pod {
    let mut pod = pod(name, node, json!({"requests": {"cpu": cpu}}), json!({"nodeName": node}));
    pod.labels_mut().insert("app".into(), name.into());
    pod
}

/// One card on `node`, with `memory`.
async fn card(ns: &TestNamespace, node: &str, memory: &str) {
    let mut device = device("gpu0", "Physical", None);
    device["capacity"]["gpu.deckhouse.io/memory"]["value"] = json!(memory);
    let slices = Api::<ResourceSlice>::all(ns.client());
    create(&slices, &slice(ns, node, node, 1, json!({"devices": [device]}))).await;
}

/// Deletes the Pod and its claim, and waits until the claim is gone (kube-controller-manager
/// deallocates it and takes its finalizer off first).
async fn remove(ns: &TestNamespace, name: &str) {
    let now = DeleteParams::default().grace_period(0);
    ns.api::<Pod>().delete(name, &now).await.unwrap();
    let claims = ns.api::<ResourceClaim>();
    claims.delete(name, &now).await.unwrap();
    wait_until(&format!("claim {name} gone"), Duration::from_secs(60), || async {
        Ok(match claims.get_opt(name).await? {
            None => Progress::Done(()),
            Some(claim) => Progress::Pending(format!("{:?}", claim.finalizers())),
        })
    })
    .await
    .unwrap();
}

type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// Every allocation the claim `name` is seen with, in order, from when this returns (its watch
/// has listed the claim).
async fn allocations_seen(ns: &TestNamespace, name: &str) -> Seen {
    let seen = Seen::default();
    let listed = Arc::new(AtomicBool::new(false));
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let (record, done) = (seen.clone(), listed.clone());
    let stream = watcher(ns.api::<ResourceClaim>(), config).for_each(move |event| {
        match event {
            Ok(watcher::Event::Apply(claim) | watcher::Event::InitApply(claim)) => {
                let devices = allocated_devices(&claim);
                let mut seen = record.lock().unwrap();
                if !devices.is_empty() && seen.last() != Some(&devices) {
                    seen.push(devices);
                }
            }
            Ok(watcher::Event::InitDone) => done.store(true, Ordering::SeqCst),
            _ => {}
        }
        futures::future::ready(())
    });
    tokio::spawn(stream);
    wait_until("the claim's watch to list it", Duration::from_secs(60), || async {
        Ok(match listed.load(Ordering::SeqCst) {
            true => Progress::Done(()),
            false => Progress::Pending("not yet".into()),
        })
    })
    .await
    .unwrap();
    seen
}

fn node_of(pod: &Pod) -> String {
    pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_room_for_the_pods_cpu_is_not_chosen() {
    let ns = TestNamespace::create("dra-node-fit").await.unwrap();
    let client = ns.client();
    install_crds(&client).await;
    let busy = ReadyNode::register(&ns, "busy", BTreeMap::new()).await.unwrap();
    let free = ReadyNode::register(&ns, "free", BTreeMap::new()).await.unwrap();
    card(&ns, busy.name(), "6Gi").await;
    card(&ns, free.name(), "24Gi").await;
    let classes = Api::<DeviceClass>::all(client.clone());
    let class = create(&classes, &device_type_class(&ns, "physical", "Physical"))
        .await
        .name_any();
    let (claims, pods) = (ns.api::<ResourceClaim>(), ns.api::<Pod>());
    let ws = AgentWorkspace::new();
    let (_controller, _) = start_dra_controller(&ns, &ws).await;
    let pool = |node: &ReadyNode| vec![(format!("gpus/{}", node.name()), "gpu0".to_owned())];

    // 0. Both nodes have room: best fit takes the smaller card, on `busy`.
    create(&claims, &claim("probe", &class)).await;
    create(&pods, &gated("probe", "1", json!({}))).await;
    let bound = bound_pod(&ns, "probe").await;
    let allocated = allocated_devices(&claims.get("probe").await.unwrap());
    assert_eq!(allocated, pool(&busy), "best fit prefers busy's card");
    assert_eq!(node_of(&bound), busy.name());
    remove(&ns, "probe").await;

    // 1. A Pod bound to `busy` takes all of its 64 CPUs: the next Pod gets `free`'s card.
    create(&pods, &bound_by_hand("hog", busy.name(), "64")).await;
    create(&claims, &claim("worker", &class)).await;
    let seen = allocations_seen(&ns, "worker").await;
    create(&pods, &gated("worker", "1", json!({}))).await;
    let bound = bound_pod(&ns, "worker").await;
    let allocated = allocated_devices(&claims.get("worker").await.unwrap());
    assert_eq!(allocated, pool(&free), "busy's card is free, but its CPU is not");
    assert_eq!(node_of(&bound), free.name());
    assert_eq!(
        seen.lock().unwrap().clone(),
        [pool(&free)],
        "never pinned to busy (the scheduler's PostFilter would undo that, see 2.)"
    );
    remove(&ns, "worker").await;
    pods.delete("hog", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    // 2. Out of the controller's scope: required anti-affinity to a Pod on `busy`. The controller
    //    pins the claim to `busy`; the scheduler's PostFilter deallocates it, and the scheduler
    //    allocates it on `free` and binds the Pod there.
    create(&pods, &bound_by_hand("anchor", busy.name(), "1")).await;
    create(&claims, &claim("apart", &class)).await;
    let seen = allocations_seen(&ns, "apart").await;
    let away = json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "anchor"}}, "topologyKey": "kubernetes.io/hostname"}]}}});
    create(&pods, &gated("apart", "1", away)).await;
    let bound = bound_pod(&ns, "apart").await;
    assert_eq!(node_of(&bound), free.name(), "the anti-affinity holds");
    let allocated = allocated_devices(&claims.get("apart").await.unwrap());
    assert_eq!(allocated, pool(&free));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [pool(&busy), pool(&free)],
        "allocated on busy by the controller, undone and allocated again by the scheduler"
    );
}
