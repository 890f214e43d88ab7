//! The publisher against an API server whose `DRAPartitionableDevices` gate is off: the server
//! accepts the slices but drops `sharedCounters`/`consumesCounters`, so MIG offers would overlap
//! unguarded. The publisher must notice on read-back and leave only whole-GPU offers without
//! counter fields, a Warning Event on the Node and `gpu_handler_offers_reduced{reason="CountersDropped"} 1`.
//!
//! This test starts a control plane of its own with the gate off (the shared test bed has it on),
//! at the version of the shared test bed when `GPU_TESTBED_KUBECONFIG` names one (else `K8S`, else
//! 1.34). It stops when the test process exits.

mod support;

use support::gated_cluster::cluster_with_gates;
use support::node_objects::{create_node, node_event, node_slices};
use support::publisher::RunningPublisher;

#[path = "../../../crates/dra-offers/tests/support/mock_cards.rs"]
mod mock_cards;

use mock_cards::mock_cards;

const NODE: &str = "gates-off-a30x2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_counters_leave_whole_gpus_only_with_an_event_and_a_metric() {
    let client = cluster_with_gates("slice-publication-gates-off", |release| {
        // DRAPartitionableDevices defaults to on from 1.36, so the newest release spells it out.
        if release == "1.34" {
            "DRAConsumableCapacity=true,DRAExtendedResource=true"
        } else {
            "DRAPartitionableDevices=false,DRAConsumableCapacity=true"
        }
    })
    .await;
    create_node(&client, NODE, &[]).await;

    let cards = mock_cards("a30-x2.yaml", NODE, "20b7", "a30-pcie");
    let mut publisher = RunningPublisher::start(client.clone(), NODE, cards);

    // The catalog settles on the two whole cards.
    let published = publisher
        .published_when("the fallback is published within 60 s", |c| {
            !c.is_empty() && c.keys().all(|name| !name.contains("-mig-"))
        })
        .await;
    assert_eq!(published.keys().collect::<Vec<_>>(), ["gpu0", "gpu1"]);

    // What the server stores: one complete generation of whole cards, no counter field anywhere.
    let slices = node_slices(&client, NODE).await;
    assert_eq!(slices.len(), 1, "stale slices of the probe are gone: {slices:#?}");
    let spec = &slices[0].spec;
    assert_eq!(spec.pool.resource_slice_count, 1);
    assert_eq!(spec.shared_counters, None);
    let devices = spec.devices.as_deref().unwrap();
    let names: Vec<&str> = devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["gpu0", "gpu1"]);
    for device in devices {
        assert_eq!(device.consumes_counters, None);
        let device_type = &device.attributes.as_ref().unwrap()["gpu.deckhouse.io/deviceType"];
        assert_eq!(device_type.string.as_deref(), Some("Physical"));
    }

    // Why, where the admin looks: a Warning on the Node.
    let event = node_event(&client, NODE, "CountersUnsupported").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let note = event.note.unwrap_or_default();
    for needed in [
        "sharedCounters/consumesCounters",
        "DRAPartitionableDevices",
        "kube-scheduler",
        "whole-GPU",
    ] {
        assert!(note.contains(needed), "the note names {needed}: {note}");
    }

    // And the metric a dashboard alerts on.
    let text = publisher.metrics_text();
    assert!(
        text.contains("gpu_handler_offers_reduced{reason=\"CountersDropped\"} 1"),
        "{text}"
    );

    publisher.stop().await;
}
