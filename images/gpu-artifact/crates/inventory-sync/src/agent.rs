//! The node agent's event loop: one sync at start, then a sync after every burst of PCI uevents or
//! watch events on this node's PhysicalGPUs. Nothing runs on a timer.

use std::sync::Arc;
use std::time::Duration;

use component_base::{Readiness, Shutdown};
use controller_plumbing::{Backoff, EventPublisher, retry_until_ok};
use futures::StreamExt;
use gpu_api::PhysicalGPU;
use gpu_api::labels;
use host_inventory::{GpuFilter, HostRoot, PciIds, read_host_facts, scan_gpus};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::Notify;

use crate::FIELD_MANAGER;
use crate::config::AgentConfig;
use crate::desired::{NodeIdentity, desired_gpus, node_labels};
use crate::metrics::AgentMetrics;
use crate::writer::InventoryWriter;

mod uevents;

/// Quiet time that ends a burst: a hotplug brings several uevents (add, bind, ...) within
/// milliseconds, and they should cost one scan.
const BURST_WINDOW: Duration = Duration::from_millis(50);

pub const READY_GATE: &str = "inventory-synced";

pub async fn run(
    config: AgentConfig,
    client: Client,
    shutdown: Shutdown,
    readiness: Readiness,
    metrics: AgentMetrics,
) -> anyhow::Result<()> {
    readiness.register(READY_GATE);
    let nodes = Api::<Node>::all(client.clone());
    let Some(node) = retry_until_ok(&format!("reading node {}", config.node_name), &shutdown, || {
        nodes.get(&config.node_name)
    })
    .await
    else {
        return Ok(());
    };
    let identity = NodeIdentity {
        name: config.node_name.clone(),
        uid: node.metadata.uid.clone().unwrap_or_default(),
    };
    let root = HostRoot::new(&config.host_root);
    let filter = GpuFilter {
        vendors: config.vendors.clone(),
        ..GpuFilter::nvidia()
    };
    // pci.ids is read once: names of known devices do not change while the agent runs.
    let ids = match PciIds::load(&root, &config.vendors) {
        Ok(ids) => Some(ids),
        Err(error) => {
            tracing::warn!(%error, "no usable pci.ids on the host: PCI names will be absent");
            None
        }
    };

    let trigger = Arc::new(Notify::new());
    let gpus = Api::<PhysicalGPU>::all(client.clone());
    let (store, store_writer) = reflector::store();
    let selector = format!("{}={}", labels::NODE, config.node_name);
    let watch_trigger = trigger.clone();
    let watch = watcher(gpus.clone(), watcher::Config::default().labels(&selector))
        .backoff(controller_plumbing::WatchBackoff::default())
        .reflect(store_writer)
        .for_each(move |event| {
            if let Err(error) = event {
                tracing::warn!(%error, "PhysicalGPU watch error");
            }
            watch_trigger.notify_one();
            futures::future::ready(())
        });
    tokio::spawn(watch);
    uevents::spawn(
        config.uevents.clone(),
        trigger.clone(),
        shutdown.clone(),
        metrics.clone(),
    )?;

    let events = EventPublisher::new(client.clone(), "gpu-node-agent", Some(config.node_name.clone()));
    let writer = InventoryWriter::new(gpus, identity.clone(), events);
    let mut applied_node_labels = None;
    let mut retry = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    tokio::select! {
        ready = store.wait_until_ready() => ready?,
        _ = shutdown.cancelled() => return Ok(()),
    }
    trigger.notify_one();
    loop {
        tokio::select! {
            _ = trigger.notified() => {}
            _ = shutdown.cancelled() => return Ok(()),
        }
        while tokio::time::timeout(BURST_WINDOW, trigger.notified()).await.is_ok() {}

        let scan = scan_gpus(&root, &filter, ids.as_ref());
        for warning in &scan.warnings {
            tracing::warn!(path = %warning.path.display(), problem = %warning.problem, "host scan skipped a device");
        }
        let facts = read_host_facts(&root);
        let labels = node_labels(&facts);
        let outcome = async {
            if applied_node_labels.as_ref() != Some(&labels) && !labels_present(&node, &labels) {
                let patch =
                    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": identity.name, "labels": labels}});
                nodes
                    .patch(
                        &identity.name,
                        &PatchParams::apply(FIELD_MANAGER).force(),
                        &Patch::Apply(&patch),
                    )
                    .await?;
            }
            applied_node_labels = Some(labels.clone());
            let desired = desired_gpus(&identity, &scan, &facts);
            let report = writer.sync(&desired, &store.state()).await?;
            anyhow::Ok((report, desired.len()))
        }
        .await;
        match outcome {
            Ok((report, kept)) => {
                retry = Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
                readiness.set(READY_GATE, true);
                metrics.synced(kept.saturating_sub(report.foreign.len()));
                if !report.wrote_nothing() || !report.foreign.is_empty() {
                    tracing::info!(?report, gpus = scan.gpus.len(), "inventory synced");
                }
            }
            Err(error) => {
                metrics.sync_failed();
                let delay = retry.next_delay();
                tracing::warn!(error = %format!("{error:#}"), retry_in = ?delay, "inventory sync failed");
                let again = trigger.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    again.notify_one();
                });
            }
        }
    }
}

fn labels_present(node: &Node, labels: &std::collections::BTreeMap<String, String>) -> bool {
    let have = node.metadata.labels.clone().unwrap_or_default();
    labels.iter().all(|(k, v)| have.get(k) == Some(v))
}
