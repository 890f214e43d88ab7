//! The double-allocation repair (issue 16, item 4) on the real control plane, with the race forced:
//! while gpu-dra-controller is stopped, the real scheduler allocates claim `kept` for a Pod and
//! reserves it; then claim `racer` is given the same card, written as a second allocator would
//! (the scheduler and the controller at the same moment, or two replicas during a lease change).
//! The controller, started under its RBAC, finds the card held twice: it clears `racer`'s
//! allocation (neither reserved nor prepared) with a DoubleAllocationRepaired Event, counts it in
//! its metrics, and once a gated Pod comes for `racer` allocates it again to the free card; `kept`
//! keeps its card and its Pod.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::{AgentWorkspace, install_crds};
use support::dra_controller_run::*;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

fn claim(name: &str, class: &str) -> ResourceClaim {
    serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}))
    .unwrap()
}

fn reserved_for(claim: &ResourceClaim) -> Vec<String> {
    let reserved = claim.status.as_ref().and_then(|s| s.reserved_for.clone());
    reserved.unwrap_or_default().into_iter().map(|r| r.name).collect()
}

async fn repaired_count(port: u16) -> anyhow::Result<Option<String>> {
    let out = std::process::Command::new("curl")
        .args(["-fsS", "--max-time", "2", &format!("http://127.0.0.1:{port}/metrics")])
        .output()?;
    let body = String::from_utf8(out.stdout)?;
    let line = body
        .lines()
        .find(|l| l.starts_with("gpu_dra_double_allocations_repaired"));
    Ok(line.map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_given_to_two_claims_is_taken_back_from_the_one_not_in_use() {
    let ns = TestNamespace::create("dra-repair").await.unwrap();
    let client = ns.client();
    install_crds(&client).await;
    let node = ReadyNode::register(&ns, "two-cards", BTreeMap::new()).await.unwrap();
    let cards = json!({"devices": [device("gpu0", "Physical", None), device("gpu1", "Physical", None)]});
    let slices = Api::<ResourceSlice>::all(client.clone());
    create(&slices, &slice(&ns, "cards", node.name(), 1, cards)).await;
    let classes = Api::<DeviceClass>::all(client.clone());
    let physical = create(&classes, &device_type_class(&ns, "physical", "Physical"))
        .await
        .name_any();
    let claims = ns.api::<ResourceClaim>();

    // The scheduler allocates `kept` for the Pod `user` and reserves it (no controller runs yet).
    create(&claims, &claim("kept", &physical)).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "kept"}]});
    create(
        &ns.api::<Pod>(),
        &pod("user", node.name(), json!({"claims": [{"name": "gpu"}]}), uses),
    )
    .await;
    bound_pod(&ns, "user").await;
    let kept = claim_when(&claims, "kept", "reserved for user", |c| {
        reserved_for(c) == ["user"] && allocated_devices(c).len() == 1
    })
    .await;
    let card = allocated_devices(&kept).remove(0);
    let other = if card.1 == "gpu0" { "gpu1" } else { "gpu0" };

    // A second allocator gives `racer` the same card, later.
    create(&claims, &claim("racer", &physical)).await;
    let mut racer = claims.get("racer").await.unwrap();
    let mut allocation = kept.status.clone().unwrap().allocation.unwrap();
    allocation.allocation_timestamp = Some(Time(Timestamp::now()));
    racer.status.get_or_insert_default().allocation = Some(allocation);
    claims
        .replace_status("racer", &PostParams::default(), &racer)
        .await
        .unwrap();
    assert_eq!(
        allocated_devices(&claims.get("racer").await.unwrap()),
        vec![card.clone()],
        "the card is held twice"
    );

    let ws = AgentWorkspace::new();
    let (controller, port) = start_dra_controller(&ns, &ws).await;
    let held_twice = format!("device {}/{}", card.0, card.1);
    let kept_key = format!("{}/kept", ns.name());
    let repaired = event_whose_note(
        &ns,
        "racer",
        "DoubleAllocationRepaired",
        Duration::from_secs(30),
        |note| note.contains(&format!("{held_twice} was also allocated to {kept_key}")),
    )
    .await;
    assert_eq!(repaired.type_.as_deref(), Some("Warning"));
    // A Pod comes for `racer`: the controller allocates it again, to the free card.
    create(&ns.api::<Pod>(), &gated_claim_pod("waiting", node.name(), "racer")).await;
    let racer = claim_when(&claims, "racer", "allocated again to the free card", |c| {
        allocated_devices(c) == vec![(card.0.clone(), other.to_owned())]
    })
    .await;
    let writers: Vec<_> = racer
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(writers.contains(&"gpu-dra-controller".to_owned()), "{writers:?}");
    let kept = claims.get("kept").await.unwrap();
    assert_eq!(
        allocated_devices(&kept),
        vec![card.clone()],
        "the reserved claim keeps its card"
    );
    assert_eq!(reserved_for(&kept), ["user"]);
    let counted = wait_until("the repair counted in /metrics", Duration::from_secs(20), || async {
        Ok(match repaired_count(port).await? {
            Some(line) if line.ends_with(" 1") => Progress::Done(line),
            seen => Progress::Pending(format!("{seen:?}")),
        })
    })
    .await
    .unwrap();
    assert!(counted.starts_with("gpu_dra_double_allocations_repaired"), "{counted}");
    let events = events_about(&ns, "kept", "DoubleAllocationRepaired").await.unwrap();
    assert!(events.is_empty(), "kept was not touched: {events:?}");
    drop(controller);
}
