//! The publisher against an API server whose `DRAConsumableCapacity` gate is off: the server drops
//! `allowMultipleAllocations` and capacity `requestPolicy`, so a shared offer would become an
//! exclusive card that one claim takes whole. The publisher must notice on read-back and leave no
//! shared offer (MIG and whole cards stay, their counters kept), a `SharingUnsupported` Warning on
//! the Node and `gpu_handler_offers_reduced{reason="SharingDropped"} 1`.

mod support;

use support::gated_cluster::cluster_with_gates;
use support::node_objects::{create_node, node_event, node_slices};
use support::publisher::RunningPublisher;

#[path = "../../../crates/dra-offers/tests/support/mock_cards.rs"]
mod mock_cards;

const NODE: &str = "sharing-off-a30";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_sharing_fields_leave_no_shared_offer_with_an_event_and_a_metric() {
    let client = cluster_with_gates("slice-publication-sharing-off", |release| {
        // DRAConsumableCapacity is alpha (off) in 1.34 and beta (on) from 1.36.
        if release == "1.34" {
            "DRAPartitionableDevices=true,DRAExtendedResource=true"
        } else {
            "DRAPartitionableDevices=true,DRAConsumableCapacity=false"
        }
    })
    .await;
    create_node(&client, NODE, &[("gpu.deckhouse.io/allow-mps", "true")]).await;

    let cards = mock_cards::mock_cards("a30.yaml", NODE, "20b7", "a30-pcie");
    let mut publisher = RunningPublisher::start(client.clone(), NODE, cards);

    // The catalog settles without the shared offer, MIG still there.
    let published = publisher
        .published_when("the fallback is published within 60 s", |c| {
            c.contains_key("gpu0") && !c.contains_key("gpu0-mps")
        })
        .await;
    assert!(published.keys().any(|name| name.contains("-mig-")), "{published:?}");

    let slices = node_slices(&client, NODE).await;
    let devices: Vec<_> = slices.iter().flat_map(|s| s.spec.devices.iter().flatten()).collect();
    assert!(
        devices.iter().all(|d| !d.name.ends_with("-mps")),
        "no shared offer is stored"
    );
    assert!(devices.iter().all(|d| d.allow_multiple_allocations.is_none()));
    assert!(
        devices.iter().any(|d| d.consumes_counters.is_some()),
        "counters are kept"
    );

    let note = node_event(&client, NODE, "SharingUnsupported")
        .await
        .note
        .unwrap_or_default();
    assert!(
        note.contains("DRAConsumableCapacity"),
        "the note names the gate: {note}"
    );

    let text = publisher.metrics_text();
    assert!(
        text.contains("gpu_handler_offers_reduced{reason=\"SharingDropped\"} 1"),
        "{text}"
    );

    publisher.stop().await;
}
