//! The publisher against an API server whose `DRADeviceTaints` gate is off: the server would drop
//! the taints of an unhealthy card, leaving it offered as healthy. The publisher must find out
//! before any taint is lost (a dry run), withhold the card instead, say why with Warning Events on
//! the Node and `gpu_handler_offers_reduced{reason="TaintsDropped"} 1`, keep the card's devices
//! known to the node (for the kubelet's health stream), and publish the card again once it recovers.
//!
//! This test starts a control plane of its own with the gate off (the shared test bed has it on),
//! at the version of the shared test bed when `GPU_TESTBED_KUBECONFIG` names one (else `K8S`, else
//! 1.34). It stops when the test process exits.

mod support;

use dra_offers::EFFECT_NO_SCHEDULE;
use k8s_openapi::api::resource::v1::DeviceTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use support::gated_cluster::cluster_with_gates;
use support::node_objects::{create_node, node_event, node_slices};
use support::publisher::RunningPublisher;

#[path = "../../../crates/dra-offers/tests/support/mock_cards.rs"]
mod mock_cards;

use mock_cards::mock_cards;

const NODE: &str = "taints-off-a30x2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_card_is_withheld_with_events_where_taints_are_dropped() {
    let client = cluster_with_gates("slice-publication-taints-off", |release| {
        if release == "1.34" {
            "DRAPartitionableDevices=true,DRAConsumableCapacity=true,DRAExtendedResource=true"
        } else {
            // GA in 1.37 but not locked yet; the rules depend on the taints.
            "DRAPartitionableDevices=true,DRAConsumableCapacity=true,DRADeviceTaints=false,DRADeviceTaintRules=false"
        }
    })
    .await;
    create_node(&client, NODE, &[]).await;

    let healthy = mock_cards("a30-x2.yaml", NODE, "20b7", "a30-pcie");
    let mut sick = healthy.clone();
    sick[1].taints = vec![DeviceTaint {
        key: "gpu.deckhouse.io/xid".into(),
        value: Some("79".into()),
        effect: EFFECT_NO_SCHEDULE.into(),
        time_added: Some(Time("2026-11-27T10:00:00Z".parse().unwrap())),
    }];
    let mut publisher = RunningPublisher::start(client.clone(), NODE, sick);

    let published = publisher
        .published_when("the healthy card alone", |c| {
            !c.is_empty() && c.keys().all(|name| name.starts_with("gpu0"))
        })
        .await;
    assert!(
        published.contains_key("gpu0-mig-1g6gb-0"),
        "the healthy card keeps its MIG offers"
    );
    let stored: Vec<String> = node_slices(&client, NODE)
        .await
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten().map(|d| d.name.clone()))
        .collect();
    assert!(stored.iter().all(|name| name.starts_with("gpu0")), "{stored:?}");
    let all_devices = publisher.all_devices.borrow().clone();
    assert!(all_devices.contains_key("gpu1") && all_devices.contains_key("gpu1-mig-1g6gb-0"));

    let unsupported = node_event(&client, NODE, "DeviceTaintsUnsupported").await;
    assert_eq!(unsupported.type_.as_deref(), Some("Warning"));
    let note = unsupported.note.unwrap_or_default();
    assert!(note.contains("DRADeviceTaints") && note.contains("withdrawn"), "{note}");
    let withdrawn = node_event(&client, NODE, "UnhealthyGPUsWithdrawn").await;
    let note = withdrawn.note.unwrap_or_default();
    assert!(
        note.contains(&format!("{NODE}-1-10de-20b7 (gpu.deckhouse.io/xid=79:NoSchedule)")),
        "{note}"
    );
    assert!(
        publisher
            .metrics_text()
            .contains("gpu_handler_offers_reduced{reason=\"TaintsDropped\"} 1")
    );

    // The card recovers: it is offered again.
    publisher.cards.send_replace(healthy);
    publisher
        .published_when("both cards again", |c| c.contains_key("gpu1") && c.contains_key("gpu0"))
        .await;
    publisher.stop().await;
}
