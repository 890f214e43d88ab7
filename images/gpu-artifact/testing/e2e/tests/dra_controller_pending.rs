//! Pending reasons (issue 16, item 5) through the real gpu-dra-controller process under its
//! RBAC: a claim that fits nowhere gets one CannotAllocate Event naming the nearest nodes and the
//! reason on each, computed by the engine that allocates. One cluster holds every reason at once:
//! node `card` whose A30 counters a Physical claim holds (MIG partitions exist but are taken), node
//! `migoff` labelled `allow-mig=false` (it offers the whole card only), and node `notready` whose
//! PhysicalGPU is not DriverReady (it offers nothing). Claims, each waited for by a gated Pod, ask
//! for a MIG partition, a device type no node has, more cards than any node has, and a class whose
//! CEL fails. A gated Pod gets its claim's Event; when a reason changes the Event is updated, not
//! repeated; once the holder's Pod is done, the waiting claims are allocated. One controller acts
//! cluster-wide, so this is one test.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use claim_allocation::selection::SCHEDULING_GATE;
use k8s_openapi::api::core::v1::{Pod, PodSchedulingGate};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::{AgentWorkspace, install_crds};
use support::dra_controller_run::*;
use support::*;
use testbed::{ReadyNode, TestNamespace};

/// A Pending reason is explained at most every 30 s per claim, so a note is complete (or changed)
/// within two intervals: the first explanation may come before the controller saw the last object.
const WITHIN_TWO_EXPLANATIONS: Duration = Duration::from_secs(75);

fn claim(name: &str, class: &str, count: Option<i64>) -> ResourceClaim {
    let mut exactly = json!({"deviceClassName": class});
    if let Some(count) = count {
        exactly["allocationMode"] = json!("ExactCount");
        exactly["count"] = json!(count);
    }
    serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name}, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}))
    .unwrap()
}

/// The part of a CannotAllocate note about `node` (parts are separated by "; ").
fn about_node<'n>(note: &'n str, node: &str) -> Option<&'n str> {
    let note = note.strip_prefix("cannot allocate: ").unwrap_or(note);
    let note = note.split_once(" cannot be allocated: ").map_or(note, |(_, n)| n);
    note.split("; ")
        .find(|part| part.starts_with(&format!("node {node}: ")))
}

fn has(note: &str, node: &str, text: &str) -> bool {
    about_node(note, node).is_some_and(|part| part.contains(text))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_claims_say_why_node_by_node() {
    let ns = TestNamespace::create("dra-pending").await.unwrap();
    let client = ns.client();
    install_crds(&client).await;
    let card = ReadyNode::register(&ns, "card", BTreeMap::new()).await.unwrap();
    let migoff_labels = BTreeMap::from([("gpu.deckhouse.io/allow-mig".to_owned(), "false".to_owned())]);
    let migoff = ReadyNode::register(&ns, "migoff", migoff_labels).await.unwrap();
    let notready = ns.unique("notready");
    let notready_gpu = ns.unique("notready-gpu0");
    physical_gpu_driver_ready(&ns, &notready_gpu, &notready, "False").await;

    let set = "pgpu-0000-01-00-0";
    let counters = json!([{"name": set, "counters": {"memory": {"value": "24Gi"}}}]);
    let devices = json!([
        device("gpu0", "Physical", Some((set, "24Gi"))),
        device("gpu0-mig-1g6gb-0", "MIG", Some((set, "6Gi"))),
        device("gpu0-mig-1g6gb-1", "MIG", Some((set, "6Gi"))),
    ]);
    publish_card(&ns, card.name(), counters, devices).await;
    let classes = Api::<DeviceClass>::all(client.clone());
    let physical = create(&classes, &device_type_class(&ns, "physical", "Physical"))
        .await
        .name_any();
    let mig = create(&classes, &device_type_class(&ns, "mig", "MIG")).await.name_any();
    let vgpu = create(&classes, &device_type_class(&ns, "vgpu", "vGPU"))
        .await
        .name_any();
    let broken_cel =
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].noSuchAttribute == "x""#;
    let broken = create(&classes, &device_class(&ns, "broken", broken_cel, None))
        .await
        .name_any();

    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;
    let claims = ns.api::<ResourceClaim>();
    // The whole card, taken by `holder` (the only card with counters: `migoff` is not published yet).
    gated_pod_waiting_for(&ns, claim("holder", &physical, None)).await;
    let pool = format!("gpus/{}", card.name());
    let is_on = |device: &'static str, pool: String| {
        move |c: &ResourceClaim| allocated_devices(c) == vec![(pool.clone(), device.to_owned())]
    };
    claim_when(&claims, "holder", "holds the whole card", is_on("gpu0", pool.clone())).await;
    let migoff_card = json!({"devices": [device("gpu0", "Physical", None)]});
    let slices = Api::<ResourceSlice>::all(client.clone());
    create(&slices, &slice(&ns, "migoff", migoff.name(), 1, migoff_card)).await;

    // The card's counters taken, naming the claim; MIG off by label; DriverReady False.
    gated_pod_waiting_for(&ns, claim("mig-waits", &mig, None)).await;
    let holder = format!("{}/holder", ns.name());
    let mig_off = format!("no device of class {mig} (MIG is off on this node: gpu.deckhouse.io/allow-mig=false)");
    let not_ready = format!("offers no devices, its GPUs are not DriverReady ({notready_gpu})");
    let first = event_whose_note(&ns, "mig-waits", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        has(note, card.name(), &format!("counters taken by {holder}"))
            && has(note, migoff.name(), &mig_off)
            && has(note, &notready, &not_ready)
    })
    .await;

    // No device of the class on any node.
    gated_pod_waiting_for(&ns, claim("no-device", &vgpu, None)).await;
    event_whose_note(&ns, "no-device", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        let none = format!("request gpu: no device of class {vgpu}");
        has(note, card.name(), &none) && has(note, migoff.name(), &none) && !note.contains("MIG is off")
    })
    .await;

    // A count larger than any node can give.
    gated_pod_waiting_for(&ns, claim("three-cards", &physical, Some(3))).await;
    event_whose_note(&ns, "three-cards", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        note.contains("request gpu asks for 3 devices, more than any node can give (at most 1 match on one node)")
            && has(note, migoff.name(), "asks for 3 devices, the node has 1 that match")
    })
    .await;

    // The class's CEL error.
    gated_pod_waiting_for(&ns, claim("broken-class", &broken, None)).await;
    event_whose_note(&ns, "broken-class", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        note.contains(&format!("class {broken}: selector #0")) && note.contains("noSuchAttribute")
    })
    .await;

    // A gated Pod gets its claim's Event.
    one_request_template(&ns, "mig", json!({"deviceClassName": mig}), None).await;
    let mut gated = templated_pod("gated", card.name(), "mig");
    let gate = PodSchedulingGate {
        name: SCHEDULING_GATE.to_owned(),
    };
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![gate]);
    create(&ns.api::<Pod>(), &gated).await;
    let pod_event = event_whose_note(&ns, "gated", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        note.starts_with("claim gated-gpu-") && has(note, card.name(), &format!("counters taken by {holder}"))
    })
    .await;
    assert_eq!(
        pod_event.regarding.as_ref().and_then(|r| r.kind.as_deref()),
        Some("Pod")
    );

    // The reason changes (the card on `notready` became DriverReady): the same Event, a new note.
    physical_gpu_driver_ready(&ns, &notready_gpu, &notready, "True").await;
    let changed = event_whose_note(&ns, "mig-waits", "CannotAllocate", WITHIN_TWO_EXPLANATIONS, |note| {
        !note.contains(&notready) && has(note, card.name(), &format!("counters taken by {holder}"))
    })
    .await;
    assert_eq!(changed.metadata.uid, first.metadata.uid, "updated, not repeated");
    assert_ne!(changed.note, first.note);

    // The holder's Pod is done: kube-controller-manager deallocates the holder, and both MIG claims
    // are allocated (the Pod's once its gate is lifted).
    bound_pod(&ns, "holder-user").await;
    let done = json!({"status": {"phase": "Succeeded"}});
    ns.api::<Pod>()
        .patch_status("holder-user", &PatchParams::default(), &Patch::Merge(&done))
        .await
        .unwrap();
    let allocated = |c: &ResourceClaim| {
        let devices = allocated_devices(c);
        !devices.is_empty() && devices.iter().all(|(p, _)| *p == pool)
    };
    claim_when(&claims, "mig-waits", "allocated on the card", allocated).await;
    let bound = bound_pod(&ns, "gated").await;
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some(card.name()));
    drop(controller);
}
