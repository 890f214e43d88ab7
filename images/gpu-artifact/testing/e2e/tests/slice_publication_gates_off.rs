//! The publisher against an API server whose `DRAPartitionableDevices` gate is off: the server
//! accepts the slices but drops `sharedCounters`/`consumesCounters`, so MIG offers would overlap
//! unguarded. The publisher must notice on read-back and leave only whole-GPU offers without
//! counter fields, a Warning Event on the Node and `gpu_handler_offers_reduced{reason="CountersDropped"} 1`.
//!
//! This test starts a control plane of its own with the gate off (the shared test bed has it on),
//! at the version of the shared test bed when `GPU_TESTBED_KUBECONFIG` names one (else `K8S`, else
//! 1.34). It stops when the test process exits; its state stays in
//! `.testbed/slice-publication-gates-off-<release>` until the next run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use component_base::Shutdown;
use dra_offers::DeviceCatalog;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::ObjectMeta;
use kube::{Api, Client, Config};
use prometheus_client::registry::Registry;
use slice_publication::{PublicationMetrics, PublisherConfig};
use testbed::{Progress, TestCluster, wait_until};
use tokio::sync::watch;

#[path = "../../../crates/dra-offers/tests/support/mock_cards.rs"]
mod mock_cards;

use mock_cards::mock_cards;

const DRIVER: &str = "gpu.deckhouse.io";
const NODE: &str = "gates-off-a30x2";

/// Which release to start, and its DRA gates with `DRAPartitionableDevices` off (it defaults to on
/// from 1.36, so the newest release needs it spelled out).
async fn release_and_gates() -> (String, &'static str) {
    let release = if std::env::var_os("GPU_TESTBED_KUBECONFIG").is_some() {
        let minor = TestCluster::get().await.unwrap().server_minor().await.unwrap();
        if minor <= 34 {
            "1.34".to_owned()
        } else {
            "latest".to_owned()
        }
    } else {
        std::env::var("K8S").unwrap_or_else(|_| "1.34".into())
    };
    let gates = if release == "1.34" {
        "DRAConsumableCapacity=true,DRAExtendedResource=true"
    } else {
        "DRAPartitionableDevices=false,DRAConsumableCapacity=true"
    };
    (release, gates)
}

/// Starts the control plane with `gates`; returns a client of it.
async fn gates_off_cluster() -> Client {
    let (release, gates) = release_and_gates().await;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..");
    // One directory per release: cluster-up.sh clears it, so runs do not pile up state.
    let dir = repo
        .join(".testbed")
        .join(format!("slice-publication-gates-off-{release}"));
    let script = repo.join("tools/testbed/cluster-up.sh");
    let kubeconfig = tokio::task::spawn_blocking(move || -> PathBuf {
        let output = Command::new(script)
            .arg(&release)
            .env("TESTBED_DIR", &dir)
            .env("TESTBED_OWNER_PID", std::process::id().to_string())
            .env("TESTBED_FEATURE_GATES", gates)
            .output()
            .expect("run cluster-up.sh");
        assert!(
            output.status.success(),
            "cluster-up.sh {release} with {gates} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
    })
    .await
    .unwrap();
    let kubeconfig = Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_counters_leave_whole_gpus_only_with_an_event_and_a_metric() {
    let client = gates_off_cluster().await;
    let node = Node {
        metadata: ObjectMeta {
            name: Some(NODE.into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();

    let cards = mock_cards("a30-x2.yaml", NODE, "20b7", "a30-pcie");
    let (_cards, cards_receiver) = watch::channel(cards);
    let (catalog_sender, mut catalog) = watch::channel(DeviceCatalog::new());
    let mut registry = Registry::default();
    let metrics = PublicationMetrics::register(&mut registry);
    let shutdown = Shutdown::new();
    let config = PublisherConfig {
        node_name: NODE.into(),
        driver_name: DRIVER.into(),
        field_manager: "gpu-handler".into(),
        mig_offers: true,
    };
    let task = tokio::spawn(slice_publication::run(
        client.clone(),
        config,
        cards_receiver,
        catalog_sender,
        metrics,
        shutdown.clone(),
    ));

    // The catalog settles on the two whole cards.
    let published = tokio::time::timeout(
        Duration::from_secs(60),
        catalog.wait_for(|c| !c.is_empty() && c.keys().all(|name| !name.contains("-mig-"))),
    )
    .await
    .expect("the fallback is published within 60 s")
    .unwrap()
    .clone();
    assert_eq!(published.keys().collect::<Vec<_>>(), ["gpu0", "gpu1"]);

    // What the server stores: one complete generation of whole cards, no counter field anywhere.
    let params = ListParams::default().fields(&format!("spec.nodeName={NODE}"));
    let slices: Vec<ResourceSlice> = Api::<ResourceSlice>::all(client.clone())
        .list(&params)
        .await
        .unwrap()
        .items;
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
    let events = Api::<Event>::namespaced(client.clone(), "default");
    let event = wait_until(
        "the CountersUnsupported Event on the Node",
        Duration::from_secs(30),
        || async {
            let found = events.list(&ListParams::default()).await?.items.into_iter().find(|e| {
                e.reason.as_deref() == Some("CountersUnsupported")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(NODE)
            });
            Ok(match found {
                Some(event) => Progress::Done(event),
                None => Progress::Pending("no such Event yet".into()),
            })
        },
    )
    .await
    .unwrap();
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
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("gpu_handler_offers_reduced{reason=\"CountersDropped\"} 1"),
        "{text}"
    );

    shutdown.trigger();
    task.await.unwrap().unwrap();
}
