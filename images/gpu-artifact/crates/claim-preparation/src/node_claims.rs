//! The handler's [`ClaimPreparer`]: API read (the claim and the Pods it is reserved for),
//! resolution, the blocking pipeline, Events.

use std::sync::Arc;

use controller_plumbing::EventPublisher;
use dra_offers::DeviceCatalog;
use gpu_vendor::VendorBackend;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::{Api, Client};
use kubelet_plugin::{ClaimPreparer, ClaimRef, PreparedDevice};
use node_prepare::{NodePrepareConfig, NodePreparer, PrepareRequest};
use tokio::sync::{Notify, OnceCell, watch};

use crate::events::{reserved_pods, warn_everywhere};
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
}

impl NodeClaims {
    pub fn new(client: Client, driver: &str, config: NodePrepareConfig, links: NodeClaimsLinks) -> Self {
        let events = EventPublisher::new(client.clone(), "gpu-handler", Some(config.node_name.clone()));
        Self {
            pool: dra_offers::pool_name(&config.node_name),
            driver: driver.to_owned(),
            client,
            config,
            links,
            events,
            reconciled: OnceCell::new(),
        }
    }

    /// Waits for the vendor library and reconciles the node: claims a crash left half-prepared are
    /// rolled back, MIG instances nobody recorded are destroyed.
    pub async fn reconcile_when_ready(&self) {
        let mut backend = self.links.backend.clone();
        if backend.wait_for(Option::is_some).await.is_err() {
            return;
        }
        if let Err(error) = self.ensure_reconciled().await {
            tracing::warn!(%error, "start-up reconciliation failed; it runs again before the next prepare");
        }
    }

    async fn ensure_reconciled(&self) -> Result<(), String> {
        self.reconciled
            .get_or_try_init(|| async {
                let preparer = self.preparer()?;
                let report = blocking(move || preparer.reconcile().map_err(|e| e.to_string())).await?;
                tracing::info!(report = ?report, "start-up reconciliation done");
                self.links.after_change.notify_one();
                Ok(())
            })
            .await
            .map(|_| ())
    }

    fn preparer(&self) -> Result<NodePreparer, String> {
        let backend = self.links.backend.borrow().clone().ok_or_else(|| {
            "the NVIDIA management library (NVML) is not loaded on this node yet; see the PhysicalGPU's HardwareHealthy condition".to_owned()
        })?;
        Ok(NodePreparer::new(self.config.clone(), backend))
    }

    async fn prepare_claim(&self, claim: &ClaimRef, stored: &ResourceClaim) -> Result<Vec<PreparedDevice>, String> {
        let catalog = self.links.catalog.borrow().clone();
        let devices = resolve_devices(claim, stored, &self.driver, &self.pool, &catalog).map_err(|e| e.to_string())?;
        let (pods, vfio_requested) = pods::reserved_pods(&self.client, stored).await?;
        self.ensure_reconciled().await?;
        let preparer = self.preparer()?;
        let request = PrepareRequest {
            claim: claim.clone(),
            devices,
            vfio_requested,
            pods,
        };
        let prepared = blocking(move || preparer.prepare(&request).map_err(|e| e.to_string())).await;
        self.links.after_change.notify_one();
        prepared
    }
}

impl ClaimPreparer for NodeClaims {
    async fn prepare(&self, claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        let claims = Api::<ResourceClaim>::namespaced(self.client.clone(), &claim.namespace);
        let stored = match claims.get(&claim.name).await {
            Ok(stored) => stored,
            Err(error) => {
                return Err(format!(
                    "claim {}/{}: reading it failed: {error}",
                    claim.namespace, claim.name
                ));
            }
        };
        let result = self.prepare_claim(&claim, &stored).await;
        if let Err(message) = &result {
            tracing::warn!(claim = %claim, error = %message, "prepare failed");
            let pods = reserved_pods(&stored);
            warn_everywhere(&self.events, &claim, &pods, "PrepareFailed", "PrepareDevices", message).await;
        }
        result
    }

    async fn unprepare(&self, claim: ClaimRef) -> Result<(), String> {
        self.ensure_reconciled().await?;
        let preparer = self.preparer()?;
        let asked = claim.clone();
        let result = blocking(move || preparer.unprepare(&asked).map_err(|e| e.to_string())).await;
        self.links.after_change.notify_one();
        if let Err(message) = &result {
            tracing::warn!(claim = %claim, error = %message, "unprepare failed");
            warn_everywhere(
                &self.events,
                &claim,
                &[],
                "UnprepareFailed",
                "UnprepareDevices",
                message,
            )
            .await;
        }
        result
    }
}

/// Runs blocking vendor and file work off the async runtime.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> Result<T, String> + Send + 'static) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|panic| Err(format!("the prepare task failed: {panic}")))
}
