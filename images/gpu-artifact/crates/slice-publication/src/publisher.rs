//! One publication pass: build the desired pool, write what differs, read back what the server kept,
//! fall back to whole cards without counters when it dropped them, delete stale slices.

use controller_plumbing::EventPublisher;
use dra_offers::{
    CardOffering, DeviceCatalog, Layout, OfferPolicy, PoolTarget, Publication, build_publication, counters_dropped,
    pool_name,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;

use crate::diff::plan;
use crate::metrics::PublicationMetrics;
use crate::node_watch::NodeView;
use crate::store::SliceStore;

/// Who publishes what, for which node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublisherConfig {
    pub node_name: String,
    /// The DRA driver name, `gpu.deckhouse.io`.
    pub driver_name: String,
    /// The server-side apply field manager, e.g. `gpu-handler`.
    pub field_manager: String,
    /// The module-wide switch for MIG offers (`MIG_OFFERS`); the Node's label can only narrow it.
    pub mig_offers: bool,
}

/// The Event reason on the Node when the server dropped our counters.
pub const COUNTERS_UNSUPPORTED: &str = "CountersUnsupported";

pub(crate) struct Publisher {
    store: SliceStore,
    events: EventPublisher,
    metrics: PublicationMetrics,
    layout: Layout,
    target: PoolTarget,
    /// Cleared when the server drops counters; only a new process probes again, because a gate
    /// changes only with an API server restart and probing costs two pool generations.
    counters_supported: bool,
    mig_offers: bool,
}

impl Publisher {
    pub fn new(client: Client, config: &PublisherConfig, layout: Layout, metrics: PublicationMetrics) -> Self {
        Self {
            store: SliceStore::new(
                client.clone(),
                &config.node_name,
                &config.driver_name,
                &config.field_manager,
            ),
            events: EventPublisher::new(client, &config.field_manager, Some(config.node_name.clone())),
            metrics,
            layout,
            target: PoolTarget {
                node_name: config.node_name.clone(),
                driver: config.driver_name.clone(),
            },
            counters_supported: true,
            mig_offers: config.mig_offers,
        }
    }

    /// Brings the stored pool to what `cards` and `node` call for; returns what is published.
    pub async fn publish(&mut self, cards: &[CardOffering], node: &NodeView) -> anyhow::Result<DeviceCatalog> {
        loop {
            let publication = self.build(cards, node)?;
            let desired = owned_by(publication.slices, node);
            let stored = self.store.list().await?;
            let plan = plan(&desired, &stored);
            let mut kept = Vec::with_capacity(plan.apply.len());
            for slice in &plan.apply {
                kept.push(self.store.apply(slice).await?);
                self.metrics.count_write("apply");
            }
            if self.counters_supported
                && let Some(reason) = counters_dropped(&plan.apply, &kept)
            {
                self.fall_back(node, &reason).await;
                continue;
            }
            for name in &plan.delete {
                self.store.delete(name).await?;
                self.metrics.count_write("delete");
            }
            if !plan.apply.is_empty() || !plan.delete.is_empty() {
                tracing::info!(
                    pool = %pool_name(&self.target.node_name),
                    generation = plan.generation,
                    slices = plan.apply.len(),
                    deleted = plan.delete.len(),
                    devices = publication.catalog.len(),
                    counters = self.counters_supported,
                    "published ResourceSlices"
                );
            }
            return Ok(publication.catalog);
        }
    }

    fn build(&self, cards: &[CardOffering], node: &NodeView) -> anyhow::Result<Publication> {
        let mut policy = OfferPolicy::from_allow_mig_label(node.allow_mig.as_deref(), self.counters_supported);
        policy.mig_allowed &= self.mig_offers;
        match build_publication(&self.target, cards, policy, self.layout) {
            Ok(publication) => Ok(publication),
            Err(error) if policy.counters => {
                tracing::error!(%error, "the node's offers do not fit a ResourceSlice; publishing whole cards only");
                let whole_cards = OfferPolicy {
                    counters: false,
                    ..policy
                };
                Ok(build_publication(&self.target, cards, whole_cards, self.layout)?)
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn fall_back(&mut self, node: &NodeView, reason: &str) {
        self.counters_supported = false;
        self.metrics.set_counters_dropped(true);
        tracing::warn!(reason, "the API server dropped counters; publishing whole GPUs only");
        let note = format!(
            "The API server dropped sharedCounters/consumesCounters from the ResourceSlices of pool {pool} \
             ({reason}). The DRAPartitionableDevices feature gate must be enabled on kube-apiserver and \
             kube-scheduler. Only whole-GPU offers are published (no MIG offers) until gpu-handler restarts \
             with the gate on.",
            pool = pool_name(&node.name),
        );
        let regarding = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.name.clone()),
            uid: Some(node.uid.clone()),
            ..ObjectReference::default()
        };
        self.events
            .warning(&regarding, COUNTERS_UNSUPPORTED, "PublishResourceSlices", note)
            .await;
    }
}

/// The Node owns its slices, so they go away with it even when no handler is left to delete them.
fn owned_by(mut slices: Vec<ResourceSlice>, node: &NodeView) -> Vec<ResourceSlice> {
    for slice in &mut slices {
        slice.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.name.clone(),
            uid: node.uid.clone(),
            controller: Some(true),
            block_owner_deletion: None,
        }]);
    }
    slices
}
