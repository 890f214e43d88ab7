//! The handler's event loop. Every pass reads the vendor library for this node's cards, computes
//! the handler's part of each PhysicalGPU's status and writes only what differs; the API server is
//! read only through the watch cache, so a pass that finds nothing new makes no API call at all.
//!
//! A pass runs after:
//! - a burst of watch events on this node's PhysicalGPUs (DriverReady flips, the agent's driver
//!   binding changes, a card appears, someone edits the status; also the echo of our own writes,
//!   which costs one NVML read and finds nothing to write);
//! - a health event from the monitor thread (a critical Xid turns `HardwareHealthy` False at once);
//! - the end of a recoverable Xid's quiet period;
//! - a due retry: loading the library (0.5 s doubling to 5 min) or a failed write (0.2 s to 30 s);
//! - the NVML re-read interval (`NVML_RESYNC_INTERVAL`, default 60 s). NVML raises no event when
//!   the MIG mode or a power limit changes, and the gpu module is not the only thing that can change
//!   them (`nvidia-smi -mig 1`, `nvidia-smi -pl`, NVIDIA's mig-parted run by an administrator).
//!   Without this re-read such a change would stay invisible until some unrelated watch event. The
//!   re-read touches only NVML and the local cache: it writes nothing unless something changed. Once
//!   the handler changes modes itself (NodePrepareResources), it re-reads after its own actions
//!   instead of waiting for the interval.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use component_base::{Readiness, Shutdown};
use controller_plumbing::{Backoff, EventPublisher};
use dra_offers::CardOffering;
use futures::StreamExt;
use gpu_api::{PhysicalGPU, labels};
use gpu_vendor::{PciAddress, VendorBackend};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::config::HandlerConfig;
use crate::desired::{HandlerStatus, VendorView, card_address, desired_status, on_nvidia_driver};
use crate::health::Verdict;
use crate::health_metrics::HealthMetrics;
use crate::health_pass::{HealthPass, Judged, now};
use crate::health_tracker::HealthTracker;
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
    /// Each card's `HardwareHealthy` verdict of the latest pass, by PCI address: what the kubelet
    /// is told about the card's devices (sent only when it changes).
    pub card_health: watch::Sender<BTreeMap<PciAddress, Verdict>>,
    pub health_metrics: HealthMetrics,
}

impl HandlerLinks {
    pub fn new() -> Self {
        Self {
            trigger: Arc::new(Notify::new()),
            offers: watch::Sender::new(Vec::new()),
            backend: watch::Sender::new(None),
            card_health: watch::Sender::new(BTreeMap::new()),
            health_metrics: HealthMetrics::default(),
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
    let events = EventPublisher::new(client.clone(), crate::FIELD_MANAGER, Some(config.node_name.clone()));
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
    let tracker = HealthTracker::open(
        config.health_policy.clone(),
        config.health_files.clone(),
        links.health_metrics.clone(),
    );
    let mut health = HealthPass::new(tracker, events);
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
            let recovery = health.next_recovery_at().map(instant_at);
            let wake = [link.retry_at(), write_retry, recovery].into_iter().flatten().min();
            tokio::select! {
                _ = trigger.notified() => {}
                Some(event) = health_events.recv() => health.note(&store.state(), &event),
                _ = sleep_until(wake) => {}
                _ = tick(&mut resync) => tracing::debug!("NVML re-read interval"),
                _ = shutdown.cancelled() => return Ok(()),
            }
            while tokio::time::timeout(BURST_WINDOW, trigger.notified()).await.is_ok() {}
        }
        first_pass = false;
        let stored: Vec<Arc<PhysicalGPU>> = store
            .state()
            .into_iter()
            .filter(|gpu| gpu.metadata.deletion_timestamp.is_none())
            .collect();
        while let Ok(event) = health_events.try_recv() {
            health.note(&stored, &event);
        }

        let cards: BTreeSet<PciAddress> = stored
            .iter()
            .filter(|gpu| on_nvidia_driver(gpu))
            .filter_map(|gpu| card_address(gpu))
            .collect();
        let reading = link.read(&cards).await;
        let judged = health.judge(&stored, &reading).await;
        let view = match &reading {
            LinkReading::Unavailable { reason } => VendorView::Unavailable { reason },
            LinkReading::Available {
                readings,
                monitor_problem,
                ..
            } => VendorView::Available {
                readings,
                health: &judged.health,
                monitor_problem: monitor_problem.as_deref(),
            },
        };
        let wants: Vec<_> = stored.iter().map(|gpu| desired_status(gpu, view)).collect();
        publish_links(&links, &link, &stored, &wants, &judged, health.tracker.policy());
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

/// Shares the pass's offerable cards, each card's verdict and the loaded library, waking receivers
/// only on a change.
fn publish_links(
    links: &HandlerLinks,
    link: &VendorLink,
    stored: &[Arc<PhysicalGPU>],
    wants: &[HandlerStatus],
    judged: &Judged,
    policy: &gpu_health::HealthPolicy,
) {
    let offers = offerable_cards(
        stored.iter().map(|gpu| gpu.as_ref()),
        &judged.inventories,
        &judged.health,
        policy,
    );
    send_if_changed(&links.offers, offers);
    let verdicts: BTreeMap<PciAddress, Verdict> = stored
        .iter()
        .zip(wants)
        .filter_map(|(gpu, want)| Some((card_address(gpu)?, want.healthy.clone())))
        .collect();
    send_if_changed(&links.card_health, verdicts);
    let backend = link.backend();
    links.backend.send_if_modified(|current| {
        let changed = current.as_ref().map(Arc::as_ptr) != backend.as_ref().map(Arc::as_ptr);
        if changed {
            *current = backend;
        }
        changed
    });
}

fn send_if_changed<T: PartialEq>(sender: &watch::Sender<T>, value: T) {
    sender.send_if_modified(|current| {
        let changed = *current != value;
        if changed {
            *current = value;
        }
        changed
    });
}

fn write_backoff() -> Backoff {
    Backoff::new(Duration::from_millis(200), Duration::from_secs(5))
}

/// The tokio instant of unix second `at` (now when it is past).
fn instant_at(at: i64) -> Instant {
    Instant::now() + Duration::from_secs(u64::try_from(at - now()).unwrap_or(0))
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
