//! The handler's [`ClaimPreparer`]: API read (the claim and the Pods it is reserved for),
//! resolution, the blocking pipeline, Events, and the claim metrics of every call.

use std::sync::Arc;
use std::time::Instant;

use controller_plumbing::EventPublisher;
use dra_offers::DeviceCatalog;
use gpu_vendor::VendorBackend;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::{Api, Client};
use kubelet_plugin::{ClaimPreparer, ClaimRef, PreparedDevice};
use node_prepare::{NodePrepareConfig, NodePreparer, PrepareError, PrepareRequest};
use tokio::sync::{Mutex, Notify, OnceCell, watch};

use crate::events::{reserved_pods, warn_everywhere};
use crate::failure::{ClaimFailure, FailureReason};
use crate::metadata;
use crate::metrics::{ClaimMetrics, ClaimOperation};
use crate::pods;
use crate::resolve::resolve_devices;

/// What the claims side reads from the rest of the handler.
pub struct NodeClaimsLinks {
    /// What this node publishes, by device name.
    pub catalog: watch::Receiver<DeviceCatalog>,
    /// The vendor library, once loaded.
    pub backend: watch::Receiver<Option<Arc<dyn VendorBackend>>>,
    /// Woken after every prepare and unprepare.
    pub after_change: Arc<Notify>,
}

pub struct NodeClaims {
    client: Client,
    driver: String,
    pool: String,
    config: NodePrepareConfig,
    links: NodeClaimsLinks,
    events: EventPublisher,
    /// Start-up reconciliation, run once before the first prepare or unprepare (and as soon as the
    /// library is loaded, by [`NodeClaims::reconcile_when_ready`]).
    reconciled: OnceCell<()>,
    metrics: ClaimMetrics,
    /// Checkpoint reads for the metrics one at a time, so the last one set reads the last write.
    checkpoint_reads: Mutex<()>,
    /// Whether the API server defines KEP-5304 device metadata, asked once.
    device_metadata: OnceCell<bool>,
}

impl NodeClaims {
    pub fn new(
        client: Client,
        driver: &str,
        config: NodePrepareConfig,
        links: NodeClaimsLinks,
        metrics: ClaimMetrics,
    ) -> Self {
        let events = EventPublisher::new(client.clone(), "gpu-handler", Some(config.node_name.clone()));
        Self {
            pool: dra_offers::pool_name(&config.node_name),
            driver: driver.to_owned(),
            client,
            config,
            links,
            events,
            reconciled: OnceCell::new(),
            metrics,
            checkpoint_reads: Mutex::new(()),
            device_metadata: OnceCell::new(),
        }
    }

    /// Whether prepared claims get device metadata (the server is 1.36 or newer); a failed version
    /// read counts as no, and is asked again next time.
    async fn device_metadata_enabled(&self) -> bool {
        let asked = self
            .device_metadata
            .get_or_try_init(|| async {
                let info = self.client.apiserver_version().await?;
                Ok::<bool, kube::Error>(metadata::supported(&info.minor))
            })
            .await;
        match asked {
            Ok(enabled) => *enabled,
            Err(error) => {
                tracing::warn!(%error, "cannot read the API server's version; no device metadata for this claim");
                false
            }
        }
    }

    /// Waits for the vendor library and reconciles the node: claims a crash left half-prepared are
    /// rolled back, MIG instances nobody recorded are destroyed.
    pub async fn reconcile_when_ready(&self) {
        let mut backend = self.links.backend.clone();
        if backend.wait_for(Option::is_some).await.is_err() {
            return;
        }
        if let Err(failure) = self.ensure_reconciled().await {
            tracing::warn!(error = %failure.message, "start-up reconciliation failed; it runs again before the next prepare");
        }
    }

    async fn ensure_reconciled(&self) -> Result<(), ClaimFailure> {
        self.reconciled
            .get_or_try_init(|| async {
                let preparer = self.preparer()?;
                let report = self.run_pipeline(preparer, NodePreparer::reconcile).await?;
                tracing::info!(report = ?report, "start-up reconciliation done");
                self.links.after_change.notify_one();
                Ok(())
            })
            .await
            .map(|_| ())
    }

    fn preparer(&self) -> Result<NodePreparer, ClaimFailure> {
        let backend = self.links.backend.borrow().clone().ok_or_else(|| {
            ClaimFailure::new(
                FailureReason::LibraryNotLoaded,
                "the NVIDIA management library (NVML) is not loaded on this node yet; see the PhysicalGPU's HardwareHealthy condition",
            )
        })?;
        Ok(NodePreparer::new(self.config.clone(), backend))
    }

    /// Runs `operation` on the blocking pool, then sets the checkpoint metrics from what it left.
    async fn run_pipeline<T: Send + 'static>(
        &self,
        preparer: NodePreparer,
        operation: impl FnOnce(&NodePreparer) -> Result<T, PrepareError> + Send + 'static,
    ) -> Result<T, ClaimFailure> {
        let (outcome, preparer) = tokio::task::spawn_blocking(move || {
            let outcome = operation(&preparer).map_err(ClaimFailure::from);
            (outcome, preparer)
        })
        .await
        .map_err(|panic| ClaimFailure::new(FailureReason::TaskFailed, format!("the prepare task failed: {panic}")))?;
        let _serial = self.checkpoint_reads.lock().await;
        match tokio::task::spawn_blocking(move || preparer.prepared_claims()).await {
            Ok(Ok(claims)) => self.metrics.set_checkpoint(&claims),
            Ok(Err(error)) => tracing::warn!(%error, "the checkpoint metrics keep their last values"),
            Err(panic) => tracing::warn!(%panic, "the checkpoint metrics keep their last values"),
        }
        outcome
    }

    async fn prepare_claim(
        &self,
        claim: &ClaimRef,
        stored: &ResourceClaim,
    ) -> Result<Vec<PreparedDevice>, ClaimFailure> {
        let catalog = self.links.catalog.borrow().clone();
        let devices = resolve_devices(claim, stored, &self.driver, &self.pool, &catalog)?;
        let (pods, vfio_requested) = pods::reserved_pods(&self.client, stored)
            .await
            .map_err(|message| ClaimFailure::new(FailureReason::PodNotRead, message))?;
        self.ensure_reconciled().await?;
        let preparer = self.preparer()?;
        let request = PrepareRequest {
            claim: claim.clone(),
            devices: devices.clone(),
            vfio_requested,
            pods,
        };
        let prepared = self
            .run_pipeline(preparer, move |preparer| preparer.prepare(&request))
            .await;
        self.links.after_change.notify_one();
        let mut prepared = prepared?;
        if self.device_metadata_enabled().await {
            let writer = metadata::writer(&self.driver, &self.config);
            metadata::publish(&writer, &self.config, claim, stored, &devices, &mut prepared);
        }
        Ok(prepared)
    }

    async fn read_and_prepare(&self, claim: &ClaimRef) -> Result<Vec<PreparedDevice>, ClaimFailure> {
        let claims = Api::<ResourceClaim>::namespaced(self.client.clone(), &claim.namespace);
        let stored = claims.get(&claim.name).await.map_err(|error| {
            ClaimFailure::new(
                FailureReason::ClaimNotRead,
                format!("claim {}/{}: reading it failed: {error}", claim.namespace, claim.name),
            )
        })?;
        let result = self.prepare_claim(claim, &stored).await;
        if let Err(failure) = &result {
            tracing::warn!(claim = %claim, error = %failure.message, reason = failure.reason.as_str(), "prepare failed");
            let pods = reserved_pods(&stored);
            warn_everywhere(
                &self.events,
                claim,
                &pods,
                "PrepareFailed",
                "PrepareDevices",
                &failure.message,
            )
            .await;
        }
        result
    }

    async fn unprepare_claim(&self, claim: &ClaimRef) -> Result<(), ClaimFailure> {
        self.ensure_reconciled().await?;
        let preparer = self.preparer()?;
        let asked = claim.clone();
        let result = self
            .run_pipeline(preparer, move |preparer| preparer.unprepare(&asked))
            .await;
        self.links.after_change.notify_one();
        if result.is_ok()
            && let Err(error) =
                metadata::writer(&self.driver, &self.config).remove(&claim.namespace, &claim.name, &claim.uid)
        {
            tracing::warn!(claim = %claim, %error, "device metadata of an unprepared claim not removed");
        }
        if let Err(failure) = &result {
            tracing::warn!(claim = %claim, error = %failure.message, reason = failure.reason.as_str(), "unprepare failed");
            warn_everywhere(
                &self.events,
                claim,
                &[],
                "UnprepareFailed",
                "UnprepareDevices",
                &failure.message,
            )
            .await;
        }
        result
    }

    fn record<T>(
        &self,
        operation: ClaimOperation,
        started: Instant,
        result: Result<T, ClaimFailure>,
    ) -> Result<T, String> {
        let reason = result.as_ref().err().map(|failure| failure.reason);
        self.metrics.record(operation, started.elapsed(), reason);
        result.map_err(|failure| failure.message)
    }
}

impl ClaimPreparer for NodeClaims {
    async fn prepare(&self, claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        let started = Instant::now();
        let result = self.read_and_prepare(&claim).await;
        self.record(ClaimOperation::Prepare, started, result)
    }

    async fn unprepare(&self, claim: ClaimRef) -> Result<(), String> {
        let started = Instant::now();
        let result = self.unprepare_claim(&claim).await;
        self.record(ClaimOperation::Unprepare, started, result)
    }
}
