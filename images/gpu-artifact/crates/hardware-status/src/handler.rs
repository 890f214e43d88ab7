//! The handler's event loop. Every pass reads the vendor library for this node's cards, computes
//! the handler's part of each PhysicalGPU's status and writes only what differs; the API server is
//! read only through the watch cache, so a pass that finds nothing new makes no API call at all.
//!
//! A pass runs after:
//! - a burst of watch events on this node's PhysicalGPUs (DriverReady flips, the agent's driver
//!   binding changes, a card appears, someone edits the status; also the echo of our own writes,
//!   which costs one NVML read and finds nothing to write);
//! - a health event from the monitor thread (a critical Xid turns `HardwareHealthy` False at once);
//! - a due retry: loading the library (0.5 s doubling to 5 min) or a failed write (0.2 s to 30 s);
//! - the NVML re-read interval (`NVML_RESYNC_INTERVAL`, default 60 s). NVML raises no event when
//!   the MIG mode or a power limit changes, and the gpu module is not the only thing that can change
//!   them (`nvidia-smi -mig 1`, `nvidia-smi -pl`, NVIDIA's mig-parted run by an administrator).
//!   Without this re-read such a change would stay invisible until some unrelated watch event. The
//!   re-read touches only NVML and the local cache: it writes nothing unless something changed. Once
//!   the handler changes modes itself (NodePrepareResources), it re-reads after its own actions
//!   instead of waiting for the interval.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use component_base::{Readiness, Shutdown};
use controller_plumbing::Backoff;
use dra_offers::CardOffering;
use futures::StreamExt;
use gpu_api::{PhysicalGPU, labels};
use gpu_vendor::{HealthEvent, PciAddress, VendorBackend};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::config::HandlerConfig;
use crate::desired::{VendorView, card_address, desired_status, on_nvidia_driver};
use crate::health::HealthLedger;
use crate::offer_feed::offerable_cards;
use crate::vendor_link::{BackendLoader, LinkReading, VendorLink};
use crate::writer::StatusWriter;

/// Ready once a pass has written everything it wanted (with or without the vendor library).
pub const READY_GATE: &str = "status-synced";

/// Quiet time that ends a burst of watch events: a DriverReady flip and the agent's update arrive
/// together and should cost one pass.
const BURST_WINDOW: Duration = Duration::from_millis(50);

/// What the status loop shares with the rest of the handler.
#[derive(Clone)]
pub struct HandlerLinks {
    /// Wakes the loop for a pass; the prepare side notifies it after changing a card so that the
    /// status and the offers follow at once instead of at the next re-read interval.
    pub trigger: Arc<Notify>,
    /// The offerable cards of the latest pass (sent only when they change).
    pub offers: watch::Sender<Vec<CardOffering>>,
    /// The loaded vendor library, `None` while it is unavailable.
    pub backend: watch::Sender<Option<Arc<dyn VendorBackend>>>,
}

impl HandlerLinks {
    pub fn new() -> Self {
        Self {
            trigger: Arc::new(Notify::new()),
            offers: watch::Sender::new(Vec::new()),
            backend: watch::Sender::new(None),
        }
    }
}

impl Default for HandlerLinks {
    fn default() -> Self {
        Self::new()
    }
}

pub async fn run(
    config: HandlerConfig,
    client: Client,
    loader: BackendLoader,
    shutdown: Shutdown,
    readiness: Readiness,
    links: HandlerLinks,
) -> anyhow::Result<()> {
    readiness.register(READY_GATE);
    let gpus = Api::<PhysicalGPU>::all(client);
    let (store, store_writer) = reflector::store();
    let trigger = links.trigger.clone();
    let watch_trigger = trigger.clone();
    let selector = format!("{}={}", labels::NODE, config.node_name);
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

    let (health_sender, mut health_events) = mpsc::unbounded_channel();
    let mut link = VendorLink::new(loader, health_sender);
    let mut ledger = HealthLedger::default();
    let writer = StatusWriter::new(gpus);
    let mut resync = config.nvml_resync.map(|every| {
        let mut interval = tokio::time::interval_at(Instant::now() + every, every);
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        interval
    });
    let mut write_backoff = write_backoff();
    let mut write_retry: Option<Instant> = None;
    tokio::select! {
        ready = store.wait_until_ready() => ready?,
        _ = shutdown.cancelled() => return Ok(()),
    }
    let mut first_pass = true;
    loop {
        if !first_pass {
            let wake = [link.retry_at(), write_retry].into_iter().flatten().min();
            tokio::select! {
                _ = trigger.notified() => {}
                Some(event) = health_events.recv() => note(&mut ledger, &event),
                _ = sleep_until(wake) => {}
                _ = tick(&mut resync) => tracing::debug!("NVML re-read interval"),
                _ = shutdown.cancelled() => return Ok(()),
            }
            while tokio::time::timeout(BURST_WINDOW, trigger.notified()).await.is_ok() {}
        }
        first_pass = false;
        while let Ok(event) = health_events.try_recv() {
            note(&mut ledger, &event);
        }

        let stored: Vec<Arc<PhysicalGPU>> = store
            .state()
            .into_iter()
            .filter(|gpu| gpu.metadata.deletion_timestamp.is_none())
            .collect();
        let cards: BTreeSet<PciAddress> = stored
            .iter()
            .filter(|gpu| on_nvidia_driver(gpu))
            .filter_map(|gpu| card_address(gpu))
            .collect();
        let reading = link.read(&cards).await;
        let view = match &reading {
            LinkReading::Unavailable { reason } => VendorView::Unavailable { reason },
            LinkReading::Available {
                readings,
                monitor_problem,
            } => VendorView::Available {
                readings,
                ledger: &ledger,
                monitor_problem: monitor_problem.as_deref(),
            },
        };
        let wants: Vec<_> = stored.iter().map(|gpu| desired_status(gpu, view)).collect();
        publish_links(
            &links,
            &link,
            &reading,
            stored.iter().map(|gpu| gpu.as_ref()).zip(&wants),
        );
        let mut failures = Vec::new();
        for (gpu, want) in stored.iter().zip(&wants) {
            match writer.sync(gpu, want).await {
                Ok(false) => {}
                Ok(true) => tracing::info!(
                    physicalgpu = %gpu.name_any(),
                    hardware_healthy = want.healthy.status,
                    reason = want.healthy.reason,
                    capabilities = want.capabilities.is_some(),
                    "status updated"
                ),
                Err(error) => failures.push(format!("{error:#}")),
            }
        }
        if failures.is_empty() {
            write_retry = None;
            write_backoff = self::write_backoff();
            readiness.set(READY_GATE, true);
        } else {
            let delay = write_backoff.next_delay();
            tracing::warn!(errors = ?failures, retry_in = ?delay, "writing PhysicalGPU status failed");
            write_retry = Some(Instant::now() + delay);
        }
        tracing::debug!(cards = cards.len(), writes = writer.writes(), "pass done");
    }
}

/// Shares the pass's offerable cards and the loaded library, waking receivers only on a change.
fn publish_links<'a>(
    links: &HandlerLinks,
    link: &VendorLink,
    reading: &LinkReading,
    gpus: impl IntoIterator<Item = (&'a PhysicalGPU, &'a crate::desired::HandlerStatus)>,
) {
    let offers = match reading {
        LinkReading::Available { readings, .. } => offerable_cards(gpus, readings),
        LinkReading::Unavailable { .. } => Vec::new(),
    };
    links.offers.send_if_modified(|current| {
        let changed = *current != offers;
        if changed {
            *current = offers;
        }
        changed
    });
    let backend = link.backend();
    links.backend.send_if_modified(|current| {
        let changed = current.as_ref().map(Arc::as_ptr) != backend.as_ref().map(Arc::as_ptr);
        if changed {
            *current = backend;
        }
        changed
    });
}

fn write_backoff() -> Backoff {
    Backoff::new(Duration::from_millis(200), Duration::from_secs(5))
}

fn note(ledger: &mut HealthLedger, event: &HealthEvent) {
    if ledger.record(event) {
        tracing::warn!(card = %event.pci_address, kind = ?event.kind, "critical health event: the card is unhealthy");
    } else if !event.is_critical() {
        tracing::info!(card = %event.pci_address, kind = ?event.kind, "non-critical health event (application error)");
    }
}

async fn sleep_until(wake: Option<Instant>) {
    match wake {
        Some(at) => tokio::time::sleep_until(at).await,
        None => futures::future::pending().await,
    }
}

async fn tick(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => futures::future::pending().await,
    }
}
