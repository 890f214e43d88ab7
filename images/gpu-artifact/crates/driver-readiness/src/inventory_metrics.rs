//! The `gpu_physicalgpu_*` metrics: every PhysicalGPU of the cluster with its node, model and
//! conditions, computed at scrape time from a watch cache, so a dashboard shows the inventory by
//! node, model and health and an alert sees an unhealthy card.
//!
//! Every replica exports them, leader or not (the watch only reads): queries aggregate with
//! `max by (...)`. It never writes anything.

use std::fmt;
use std::sync::Arc;

use component_base::Shutdown;
use controller_plumbing::keep_cache;
use gpu_api::{PhysicalGPU, Vendor, labels};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::{Api, Client, ResourceExt};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub const INFO_METRIC: &str = "gpu_physicalgpu_info";
pub const CONDITION_METRIC: &str = "gpu_physicalgpu_condition";

/// `UUID` is spelled as dcgm-exporter spells it, so `on (UUID)` joins its series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
#[allow(non_snake_case)]
struct InfoLabels {
    physicalgpu: String,
    node: String,
    /// `nvidia`, `amd` or `intel`: the `gpu.deckhouse.io/vendor` label the node agent sets.
    vendor: String,
    model: String,
    pci_address: String,
    /// Empty until the handler has read the card (DriverReady=True).
    UUID: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ConditionLabels {
    physicalgpu: String,
    node: String,
    model: String,
    condition: String,
    /// `True`, `False` or `Unknown`.
    status: String,
    reason: String,
}

/// Registers the metrics, read from the cache the returned writer fills ([`keep_inventory`]).
pub fn register(registry: &mut Registry) -> Writer<PhysicalGPU> {
    let (store, writer) = reflector::store();
    registry.register_collector(Box::new(InventoryCollector { store }));
    writer
}

/// Keeps `writer`'s cache equal to the cluster's PhysicalGPUs until shutdown.
pub async fn keep_inventory(client: Client, writer: Writer<PhysicalGPU>, shutdown: Shutdown) {
    keep_cache(Api::<PhysicalGPU>::all(client), writer, shutdown, "inventory metrics").await;
}

struct InventoryCollector {
    store: Store<PhysicalGPU>,
}

impl fmt::Debug for InventoryCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InventoryCollector")
            .field("physicalgpus", &self.store.state().len())
            .finish()
    }
}

impl Collector for InventoryCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let info = Family::<InfoLabels, Gauge>::default();
        let conditions = Family::<ConditionLabels, Gauge>::default();
        for gpu in self.store.state() {
            let (gpu_info, gpu_conditions) = series(&gpu);
            info.get_or_create(&gpu_info).set(1);
            for labels in gpu_conditions {
                conditions.get_or_create(&labels).set(1);
            }
        }
        info.encode(encoder.encode_descriptor(
            INFO_METRIC,
            "1 for every PhysicalGPU, with its node, vendor, model (the gpu.deckhouse.io/device label), PCI address and UUID",
            None,
            info.metric_type(),
        )?)?;
        conditions.encode(encoder.encode_descriptor(
            CONDITION_METRIC,
            "1 for every condition of every PhysicalGPU (DriverReady, HardwareHealthy), with its status and reason",
            None,
            conditions.metric_type(),
        )?)
    }
}

/// The card's vendor as its `gpu.deckhouse.io/vendor` label says, else as the handler read it
/// (`status.capabilities.vendor`), else `unknown`.
fn vendor_of(gpu: &PhysicalGPU) -> String {
    if let Some(vendor) = gpu.labels().get(labels::VENDOR) {
        return vendor.clone();
    }
    let read = gpu.status.as_ref().and_then(|s| s.capabilities.as_ref()?.vendor);
    match read {
        Some(Vendor::Nvidia) => "nvidia",
        Some(Vendor::Amd) => "amd",
        Some(Vendor::Intel) => "intel",
        None => "unknown",
    }
    .to_owned()
}

/// The info series and the condition series of one PhysicalGPU.
fn series(gpu: &Arc<PhysicalGPU>) -> (InfoLabels, Vec<ConditionLabels>) {
    let status = gpu.status.as_ref();
    let node = gpu
        .labels()
        .get(labels::NODE)
        .cloned()
        .or_else(|| Some(status?.node_info.as_ref()?.node_name.clone()))
        .unwrap_or_default();
    let model = gpu
        .labels()
        .get(labels::DEVICE)
        .cloned()
        .or_else(|| status?.pci_info.as_ref()?.device.name.clone())
        .unwrap_or_else(|| "unknown".to_owned());
    let info = InfoLabels {
        physicalgpu: gpu.name_any(),
        node: node.clone(),
        vendor: vendor_of(gpu),
        model: model.clone(),
        pci_address: status
            .and_then(|s| s.pci_info.as_ref())
            .map(|pci| pci.address.clone())
            .unwrap_or_default(),
        UUID: status
            .and_then(|s| s.current_state.as_ref()?.nvidia.as_ref()?.gpu_uuid.clone())
            .unwrap_or_default(),
    };
    let conditions = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|condition| ConditionLabels {
            physicalgpu: gpu.name_any(),
            node: node.clone(),
            model: model.clone(),
            condition: condition.type_.clone(),
            status: condition.status.clone(),
            reason: condition.reason.clone(),
        })
        .collect();
    (info, conditions)
}

#[cfg(test)]
mod tests;
