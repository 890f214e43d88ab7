//! The `gpu_class_*` metrics: every GPUClass's device counts and Ready condition, read at scrape
//! time from a cache of the GPUClasses' status, so dashboards show devices by class (beside
//! `gpu_dra_claim_allocations{class}`, whose `class` is the same name) and an alert sees a class
//! that is not Ready. Every replica exports them, leader or not; it never writes anything.

use std::fmt;

use component_base::Shutdown;
use controller_plumbing::keep_cache;
use gpu_api::GPUClass;
use gpu_class::readiness::READY;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::{Api, Client, ResourceExt};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub const DEVICES_METRIC: &str = "gpu_class_devices";
pub const READY_METRIC: &str = "gpu_class_ready";

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct DeviceLabels {
    class: String,
    /// `published`, `allocated` or `free`.
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
struct ReadyLabels {
    class: String,
    reason: String,
}

/// Registers the metrics, read from the cache the returned writer fills ([`keep_classes`]).
pub fn register(registry: &mut Registry) -> Writer<GPUClass> {
    let (store, writer) = reflector::store();
    registry.register_collector(Box::new(ClassCollector { store }));
    writer
}

/// Keeps `writer`'s cache equal to the cluster's GPUClasses until shutdown.
pub async fn keep_classes(client: Client, writer: Writer<GPUClass>, shutdown: Shutdown) {
    keep_cache(Api::<GPUClass>::all(client), writer, shutdown, "GPUClass metrics").await;
}

struct ClassCollector {
    store: Store<GPUClass>,
}

impl fmt::Debug for ClassCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClassCollector")
            .field("gpuclasses", &self.store.state().len())
            .finish()
    }
}

impl Collector for ClassCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let devices = Family::<DeviceLabels, Gauge>::default();
        let ready = Family::<ReadyLabels, Gauge>::default();
        for class in self.store.state() {
            let name = class.name_any();
            let status = class.status.as_ref();
            if let Some(counts) = status.and_then(|s| s.devices) {
                for (state, value) in [
                    ("published", counts.published),
                    ("allocated", counts.allocated),
                    ("free", counts.free),
                ] {
                    let labels = DeviceLabels {
                        class: name.clone(),
                        state: state.to_owned(),
                    };
                    devices.get_or_create(&labels).set(value);
                }
            }
            let condition = status
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == READY));
            if let Some(condition) = condition {
                let labels = ReadyLabels {
                    class: name,
                    reason: condition.reason.clone(),
                };
                ready.get_or_create(&labels).set(i64::from(condition.status == "True"));
            }
        }
        devices.encode(encoder.encode_descriptor(
            DEVICES_METRIC,
            "Devices of each GPUClass by state: published now, allocated to claims through the class, free for a new claim",
            None,
            devices.metric_type(),
        )?)?;
        ready.encode(encoder.encode_descriptor(
            READY_METRIC,
            "1 when the GPUClass is Ready, 0 when not, with the reason of its Ready condition",
            None,
            ready.metric_type(),
        )?)
    }
}
