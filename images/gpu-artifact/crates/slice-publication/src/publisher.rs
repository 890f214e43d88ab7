//! One publication pass: build the desired pool, write what differs, read back what the server kept,
//! fall back to whole cards without counters when it dropped them (or to no shared offers when it
//! dropped the sharing fields), delete stale slices.

use std::collections::BTreeSet;

use controller_plumbing::EventPublisher;
use dra_offers::{
    CardHoldings, CardOffering, DeviceCatalog, Layout, OfferPolicy, PoolTarget, Publication, build_publication_holding,
    counters_dropped, pool_name, sharing_dropped, taints_dropped,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;

use crate::diff::plan;
use crate::metrics::{COUNTERS_DROPPED, PublicationMetrics, SHARING_DROPPED, TAINTS_DROPPED};
use crate::node_watch::NodeView;
use crate::store::SliceStore;
use crate::taint_support::{
    TAINTS_UNSUPPORTED, TaintSupport, UNHEALTHY_WITHDRAWN, carries_taints, probe, unsupported_note, withheld,
    withheld_note,
};

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
/// The Event reason on the Node when the server dropped `allowMultipleAllocations` or capacity
/// `requestPolicy`.
pub const SHARING_UNSUPPORTED: &str = "SharingUnsupported";

/// What the server dropped, and so which offers the node stops publishing.
#[derive(Debug, Clone, Copy)]
enum Dropped {
    Counters,
    Sharing,
    Taints,
}

/// What a publication pass put out: the published catalog, and every device of the node's cards,
/// withheld ones included (a claim prepared before may still use them; the kubelet is told their
/// health).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Published {
    pub catalog: DeviceCatalog,
    pub all_devices: DeviceCatalog,
}

pub(crate) struct Publisher {
    store: SliceStore,
    events: EventPublisher,
    metrics: PublicationMetrics,
    layout: Layout,
    target: PoolTarget,
    /// Cleared when the server drops counters; only a new process probes again, because a gate
    /// changes only with an API server restart and probing costs two pool generations.
    counters_supported: bool,
    /// Cleared when the server drops the sharing fields; probed again only by a new process, as
    /// above.
    sharing_supported: bool,
    /// Probed with a dry run the first time a publication carries taints.
    taints: TaintSupport,
    /// The server knows the taint effect `None` (1.35+).
    none_effect: bool,
    /// The withheld cards last announced on the Node.
    announced_withheld: BTreeSet<String>,
    mig_offers: bool,
}

impl Publisher {
    pub fn new(
        client: Client,
        config: &PublisherConfig,
        layout: Layout,
        none_effect: bool,
        metrics: PublicationMetrics,
    ) -> Self {
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
            sharing_supported: true,
            taints: TaintSupport::Unknown,
            none_effect,
            announced_withheld: BTreeSet::new(),
            mig_offers: config.mig_offers,
        }
    }

    /// Brings the stored pool to what `cards`, their `holdings` and `node` call for; returns what is
    /// published and every offer (withheld ones included, so an allocation made before they were
    /// withheld still resolves).
    pub async fn publish(
        &mut self,
        cards: &[CardOffering],
        holdings: &CardHoldings,
        node: &NodeView,
    ) -> anyhow::Result<Published> {
        loop {
            let publication = self.build(cards, holdings, node)?;
            let desired = owned_by(publication.slices, node);
            if self.taints == TaintSupport::Unknown && carries_taints(&desired) {
                match probe(&self.store, &desired).await? {
                    None => self.taints = TaintSupport::Supported,
                    Some(reason) => {
                        self.fall_back(node, Dropped::Taints, &reason).await;
                        continue;
                    }
                }
            }
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
                self.fall_back(node, Dropped::Counters, &reason).await;
                continue;
            }
            if self.sharing_supported
                && let Some(reason) = sharing_dropped(&plan.apply, &kept)
            {
                self.fall_back(node, Dropped::Sharing, &reason).await;
                continue;
            }
            if self.taints != TaintSupport::Dropped
                && let Some(reason) = taints_dropped(&plan.apply, &kept)
            {
                self.fall_back(node, Dropped::Taints, &reason).await;
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
                    sharing = self.sharing_supported,
                    "published ResourceSlices"
                );
            }
            self.announce_withheld(cards, node).await;
            self.metrics.set_offers(&self.target.node_name, &publication.catalog);
            let mut all_devices = publication.catalog.clone();
            all_devices.extend(publication.withheld);
            return Ok(Published {
                catalog: publication.catalog,
                all_devices,
            });
        }
    }

    fn policy(&self, node: &NodeView) -> OfferPolicy {
        let mut policy = OfferPolicy::from_node_labels(
            node.allow_mig.as_deref(),
            node.allow_time_slicing.as_deref(),
            node.allow_mps.as_deref(),
        );
        policy.mig_allowed &= self.mig_offers;
        policy.counters = self.counters_supported;
        policy.sharing = self.sharing_supported;
        policy.taints = self.taints != TaintSupport::Dropped;
        policy.none_effect = self.none_effect;
        policy
    }

    /// A Warning Event on the Node whenever the set of withheld cards changes to a non-empty one.
    async fn announce_withheld(&mut self, cards: &[CardOffering], node: &NodeView) {
        let now = withheld(cards, self.policy(node));
        if now == self.announced_withheld {
            return;
        }
        if !now.is_empty() {
            tracing::warn!(cards = ?now, "unhealthy GPUs withdrawn: the API server cannot carry taints");
            let note = withheld_note(node, &now);
            self.events
                .warning(
                    &node_reference(node),
                    UNHEALTHY_WITHDRAWN,
                    "PublishResourceSlices",
                    note,
                )
                .await;
        }
        self.announced_withheld = now;
    }

    fn build(&self, cards: &[CardOffering], holdings: &CardHoldings, node: &NodeView) -> anyhow::Result<Publication> {
        let policy = self.policy(node);
        match build_publication_holding(&self.target, cards, policy, self.layout, holdings) {
            Ok(publication) => Ok(publication),
            Err(error) if policy.counters => {
                tracing::error!(%error, "the node's offers do not fit a ResourceSlice; publishing whole cards only");
                let whole_cards = OfferPolicy {
                    counters: false,
                    ..policy
                };
                Ok(build_publication_holding(
                    &self.target,
                    cards,
                    whole_cards,
                    self.layout,
                    holdings,
                )?)
            }
            Err(error) => Err(error.into()),
        }
    }

    async fn fall_back(&mut self, node: &NodeView, dropped: Dropped, reason: &str) {
        let pool = pool_name(&node.name);
        let (metric, event_reason, note) = match dropped {
            Dropped::Counters => {
                self.counters_supported = false;
                tracing::warn!(reason, "the API server dropped counters; publishing whole GPUs only");
                let note = format!(
                    "The API server dropped sharedCounters/consumesCounters from the ResourceSlices of pool {pool} \
                     ({reason}). The DRAPartitionableDevices feature gate must be enabled on kube-apiserver and \
                     kube-scheduler. Only whole-GPU offers are published (no MIG offers) until gpu-handler restarts \
                     with the gate on."
                );
                (COUNTERS_DROPPED, COUNTERS_UNSUPPORTED, note)
            }
            Dropped::Sharing => {
                self.sharing_supported = false;
                tracing::warn!(
                    reason,
                    "the API server dropped the sharing fields; publishing no shared offers"
                );
                let note = format!(
                    "The API server dropped allowMultipleAllocations/requestPolicy from the ResourceSlices of pool \
                     {pool} ({reason}). The DRAConsumableCapacity feature gate must be enabled on kube-apiserver and \
                     kube-scheduler. No shared offers (TimeSlicing, MPS) are published, every GPU is offered \
                     exclusively, until gpu-handler restarts with the gate on."
                );
                (SHARING_DROPPED, SHARING_UNSUPPORTED, note)
            }
            Dropped::Taints => {
                self.taints = TaintSupport::Dropped;
                tracing::warn!(
                    reason,
                    "the API server dropped device taints; withholding unhealthy GPUs instead"
                );
                (TAINTS_DROPPED, TAINTS_UNSUPPORTED, unsupported_note(node, reason))
            }
        };
        self.metrics.set_reduced(metric, true);
        self.events
            .warning(&node_reference(node), event_reason, "PublishResourceSlices", note)
            .await;
    }
}

fn node_reference(node: &NodeView) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(node.name.clone()),
        uid: Some(node.uid.clone()),
        ..ObjectReference::default()
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
