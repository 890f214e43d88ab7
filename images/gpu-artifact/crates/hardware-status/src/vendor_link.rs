//! The handler's connection to the vendor library: loading it (and loading it again with backoff
//! while it is missing), reading this node's cards, and the thread that waits for health events.
//!
//! Vendor calls block, so they run on tokio's blocking pool; the health monitor has a thread of its
//! own because it waits most of the time.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use controller_plumbing::Backoff;
use gpu_vendor::{GpuInventory, HealthEvent, HealthMonitor, HealthReading, PciAddress, VendorBackend, VendorError};
use tokio::sync::mpsc::UnboundedSender;
use tokio::time::Instant;

/// Loads the vendor library; called again after each failure, with backoff.
pub type BackendLoader = Arc<dyn Fn() -> Result<Arc<dyn VendorBackend>, VendorError> + Send + Sync>;

/// First retry after 0.5 s, doubling up to 5 minutes: a driver being installed shows up quickly,
/// a node without one costs a load attempt every 5 minutes.
fn load_backoff() -> Backoff {
    Backoff::new(Duration::from_millis(500), Duration::from_secs(300))
}

/// How long one wait of the health thread lasts; it also bounds how long a replaced monitor lives on.
const HEALTH_WAIT: Duration = Duration::from_millis(500);

/// What one pass learned from the library.
#[derive(Debug)]
pub enum LinkReading {
    Unavailable {
        reason: String,
    },
    Available {
        readings: BTreeMap<PciAddress, Result<GpuInventory, VendorError>>,
        /// What each card said about its health (a lost card reads `lost`).
        health: BTreeMap<PciAddress, Result<HealthReading, VendorError>>,
        monitor_problem: Option<String>,
    },
}

type CardAnswers = (
    BTreeMap<PciAddress, Result<GpuInventory, VendorError>>,
    BTreeMap<PciAddress, Result<HealthReading, VendorError>>,
);

pub struct VendorLink {
    loader: BackendLoader,
    health_events: UnboundedSender<HealthEvent>,
    state: LinkState,
}

enum LinkState {
    Connected {
        backend: Arc<dyn VendorBackend>,
        monitored: BTreeSet<PciAddress>,
        _monitor: Option<MonitorThread>,
        monitor_problem: Option<String>,
    },
    Unavailable {
        reason: String,
        retry_at: Instant,
        backoff: Backoff,
    },
}

impl VendorLink {
    /// Not loaded yet; the first [`VendorLink::read`] loads. Health events go to `health_events`.
    pub fn new(loader: BackendLoader, health_events: UnboundedSender<HealthEvent>) -> Self {
        Self {
            loader,
            health_events,
            state: LinkState::Unavailable {
                reason: "not loaded yet".to_owned(),
                retry_at: Instant::now(),
                backoff: load_backoff(),
            },
        }
    }

    /// The loaded library, while it works.
    pub fn backend(&self) -> Option<Arc<dyn VendorBackend>> {
        match &self.state {
            LinkState::Connected { backend, .. } => Some(Arc::clone(backend)),
            LinkState::Unavailable { .. } => None,
        }
    }

    /// When the next load attempt is due, while the library is unavailable.
    pub fn retry_at(&self) -> Option<Instant> {
        match &self.state {
            LinkState::Unavailable { retry_at, .. } => Some(*retry_at),
            LinkState::Connected { .. } => None,
        }
    }

    /// Loads the library if it is due, reads `cards`, and makes sure the health monitor watches
    /// every card that answered (before the caller reports any of them healthy).
    pub async fn read(&mut self, cards: &BTreeSet<PciAddress>) -> LinkReading {
        self.load_if_due().await;
        let LinkState::Connected { backend, .. } = &self.state else {
            return self.unavailable_reading();
        };
        let backend = Arc::clone(backend);
        let wanted: Vec<PciAddress> = cards.iter().copied().collect();
        let answers = blocking(move || -> CardAnswers {
            let readings = wanted.iter().map(|card| (*card, backend.inventory(card))).collect();
            let health = wanted
                .iter()
                .map(|card| (*card, backend.health_reading(card)))
                .collect();
            (readings, health)
        })
        .await;
        let (readings, health): CardAnswers = match answers {
            Ok(answers) => answers,
            Err(reason) => {
                let failed = || VendorError::Failed {
                    call: "reading the card".to_owned(),
                    reason: reason.clone(),
                };
                (
                    cards.iter().map(|card| (*card, Err(failed()))).collect(),
                    cards.iter().map(|card| (*card, Err(failed()))).collect(),
                )
            }
        };
        if let Some(lost) = readings
            .values()
            .find_map(|r| r.as_ref().err().filter(|e| library_gone(e)))
        {
            tracing::warn!(error = %lost, "the vendor library stopped working; loading it again");
            self.state = LinkState::Unavailable {
                reason: lost.to_string(),
                retry_at: Instant::now(),
                backoff: load_backoff(),
            };
            return self.unavailable_reading();
        }
        let answering: BTreeSet<PciAddress> = readings
            .iter()
            .filter(|(_, r)| r.is_ok())
            .map(|(card, _)| *card)
            .collect();
        self.watch_health(answering).await;
        let LinkState::Connected { monitor_problem, .. } = &self.state else {
            unreachable!("still connected");
        };
        LinkReading::Available {
            readings,
            health,
            monitor_problem: monitor_problem.clone(),
        }
    }

    fn unavailable_reading(&self) -> LinkReading {
        match &self.state {
            LinkState::Unavailable { reason, .. } => LinkReading::Unavailable { reason: reason.clone() },
            LinkState::Connected { .. } => unreachable!("only called while unavailable"),
        }
    }

    async fn load_if_due(&mut self) {
        let LinkState::Unavailable { retry_at, backoff, .. } = &mut self.state else {
            return;
        };
        if Instant::now() < *retry_at {
            return;
        }
        let mut backoff = backoff.clone();
        let loader = Arc::clone(&self.loader);
        match blocking(move || loader())
            .await
            .unwrap_or_else(|reason| Err(VendorError::Unavailable { reason }))
        {
            Ok(backend) => {
                tracing::info!("vendor library loaded");
                self.state = LinkState::Connected {
                    backend,
                    monitored: BTreeSet::new(),
                    _monitor: None,
                    monitor_problem: None,
                };
            }
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(%error, retry_in = ?delay, "vendor library unavailable");
                self.state = LinkState::Unavailable {
                    reason: error.to_string(),
                    retry_at: Instant::now() + delay,
                    backoff,
                };
            }
        }
    }

    /// Restarts the monitor when the set of answering cards changed (a monitor covers a fixed set).
    async fn watch_health(&mut self, cards: BTreeSet<PciAddress>) {
        let LinkState::Connected {
            backend,
            monitored,
            _monitor: monitor,
            monitor_problem,
        } = &mut self.state
        else {
            return;
        };
        if *monitored == cards {
            return;
        }
        *monitor = None;
        *monitor_problem = None;
        *monitored = cards.clone();
        if cards.is_empty() {
            return;
        }
        let backend = Arc::clone(backend);
        let list: Vec<PciAddress> = cards.into_iter().collect();
        match blocking(move || backend.health_monitor(&list)).await {
            Ok(Ok(started)) => match MonitorThread::spawn(started, self.health_events.clone()) {
                Ok(thread) => *monitor = Some(thread),
                Err(problem) => *monitor_problem = Some(problem),
            },
            Ok(Err(error)) => {
                tracing::warn!(%error, "health events cannot be watched");
                *monitor_problem = Some(error.to_string());
            }
            Err(reason) => *monitor_problem = Some(reason),
        }
    }
}

/// Errors that mean the library as a whole is gone, not that one card has a problem.
fn library_gone(error: &VendorError) -> bool {
    matches!(error, VendorError::Unavailable { .. } | VendorError::DriverNotLoaded)
}

/// Runs a blocking vendor call; a panic inside becomes an error message instead of taking the
/// handler down.
async fn blocking<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(call)
        .await
        .map_err(|e| format!("vendor call panicked: {e}"))
}

/// The thread waiting on a health monitor; it stops within [`HEALTH_WAIT`] of being dropped.
struct MonitorThread {
    stop: Arc<AtomicBool>,
}

impl MonitorThread {
    fn spawn(mut monitor: Box<dyn HealthMonitor>, events: UnboundedSender<HealthEvent>) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        std::thread::Builder::new()
            .name("health-monitor".into())
            .spawn(move || {
                let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
                while !stopped.load(Ordering::Relaxed) {
                    match monitor.next_event(HEALTH_WAIT) {
                        Ok(Some(event)) => {
                            if events.send(event).is_err() {
                                return;
                            }
                        }
                        Ok(None) => {}
                        Err(error) => {
                            let delay = backoff.next_delay();
                            tracing::warn!(%error, retry_in = ?delay, "waiting for health events failed");
                            std::thread::sleep(delay);
                        }
                    }
                }
            })
            .map_err(|e| format!("cannot start the health-monitor thread: {e}"))?;
        Ok(Self { stop })
    }
}

impl Drop for MonitorThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
