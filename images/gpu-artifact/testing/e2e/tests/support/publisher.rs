//! The slice publisher run in a test's runtime, wired as gpu-handler wires it, with its metrics
//! readable as the `/metrics` text a scrape would get.

use std::time::Duration;

use component_base::Shutdown;
use dra_offers::{CardOffering, DeviceCatalog};
use kube::Client;
use prometheus_client::registry::Registry;
use slice_publication::{PublicationMetrics, PublisherConfig};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub struct RunningPublisher {
    task: JoinHandle<anyhow::Result<()>>,
    shutdown: Shutdown,
    pub cards: watch::Sender<Vec<CardOffering>>,
    catalog: watch::Receiver<DeviceCatalog>,
    /// Every device of the cards, withheld ones included.
    pub all_devices: watch::Receiver<DeviceCatalog>,
    pub metrics: PublicationMetrics,
    registry: Registry,
}

impl RunningPublisher {
    pub fn start(client: Client, node: &str, cards: Vec<CardOffering>) -> Self {
        let (cards_sender, cards_receiver) = watch::channel(cards);
        let (catalog_sender, catalog) = watch::channel(DeviceCatalog::new());
        let (all_devices_sender, all_devices) = watch::channel(DeviceCatalog::new());
        let mut registry = Registry::default();
        let metrics = PublicationMetrics::register(&mut registry);
        let shutdown = Shutdown::new();
        let config = PublisherConfig {
            node_name: node.to_owned(),
            driver_name: super::DRIVER.into(),
            field_manager: "gpu-handler".into(),
            mig_offers: true,
        };
        let task = tokio::spawn(slice_publication::run(
            client,
            config,
            cards_receiver,
            slice_publication::PublishedSenders {
                catalog: catalog_sender,
                all_devices: all_devices_sender,
            },
            metrics.clone(),
            shutdown.clone(),
        ));
        Self {
            task,
            shutdown,
            cards: cards_sender,
            catalog,
            all_devices,
            metrics,
            registry,
        }
    }

    /// Waits until the published catalog has `devices` entries.
    pub async fn published(&mut self, devices: usize) -> DeviceCatalog {
        self.published_when(&format!("{devices} devices"), |c| c.len() == devices)
            .await
    }

    /// Waits until the published catalog satisfies `done` (described by `what`).
    pub async fn published_when(&mut self, what: &str, done: impl Fn(&DeviceCatalog) -> bool) -> DeviceCatalog {
        tokio::time::timeout(Duration::from_secs(60), self.catalog.wait_for(|c| done(c)))
            .await
            .unwrap_or_else(|_| panic!("{what} published within 60 s"))
            .expect("the publisher is running")
            .clone()
    }

    /// The metrics as a scrape of `/metrics` would show them.
    pub fn metrics_text(&self) -> String {
        component_base::metrics_text(&self.registry).unwrap()
    }

    pub async fn stop(self) {
        self.shutdown.trigger();
        let result = self.task.await.expect("the publisher task does not panic");
        result.expect("the publisher ends cleanly");
    }
}
