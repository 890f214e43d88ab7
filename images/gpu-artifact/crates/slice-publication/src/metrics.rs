//! The publisher's metrics: whether offers are reduced (and why), and how often it writes slices.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// `reason` of `gpu_handler_offers_reduced`: the API server dropped our counters.
pub const COUNTERS_DROPPED: &str = "CountersDropped";
/// `reason` of `gpu_handler_offers_reduced`: the API server dropped our sharing fields.
pub const SHARING_DROPPED: &str = "SharingDropped";
/// `reason` of `gpu_handler_offers_reduced`: the API server dropped our device taints, so
/// unhealthy cards are withheld.
pub const TAINTS_DROPPED: &str = "TaintsDropped";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReducedLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// `apply` or `delete`.
    pub operation: String,
}

#[derive(Clone, Default)]
pub struct PublicationMetrics {
    pub offers_reduced: Family<ReducedLabels, Gauge>,
    pub slice_writes: Family<WriteLabels, Counter>,
}

impl PublicationMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "gpu_handler_offers_reduced",
            "1 while the node publishes fewer offers than its cards allow, by reason",
            metrics.offers_reduced.clone(),
        );
        registry.register(
            "gpu_handler_resourceslice_writes",
            "ResourceSlice writes of this handler (server-side applies and deletes)",
            metrics.slice_writes.clone(),
        );
        metrics
    }

    /// Sets `gpu_handler_offers_reduced{reason}` (one of [`COUNTERS_DROPPED`], [`SHARING_DROPPED`]).
    pub(crate) fn set_reduced(&self, reason: &str, reduced: bool) {
        let labels = ReducedLabels {
            reason: reason.to_owned(),
        };
        self.offers_reduced.get_or_create(&labels).set(i64::from(reduced));
    }

    pub(crate) fn count_write(&self, operation: &str) {
        let labels = WriteLabels {
            operation: operation.to_owned(),
        };
        self.slice_writes.get_or_create(&labels).inc();
    }

    /// Slice writes so far, both operations together (what a restart test checks).
    pub fn writes(&self) -> u64 {
        ["apply", "delete"]
            .iter()
            .map(|operation| {
                let labels = WriteLabels {
                    operation: (*operation).to_owned(),
                };
                self.slice_writes.get_or_create(&labels).get()
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_offers_and_writes_are_exposed() {
        let mut registry = Registry::default();
        let metrics = PublicationMetrics::register(&mut registry);
        metrics.set_reduced(COUNTERS_DROPPED, true);
        metrics.set_reduced(SHARING_DROPPED, false);
        metrics.count_write("apply");
        metrics.count_write("apply");
        metrics.count_write("delete");
        let text = component_base::metrics_text(&registry).unwrap();
        assert!(
            text.contains("gpu_handler_offers_reduced{reason=\"CountersDropped\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gpu_handler_offers_reduced{reason=\"SharingDropped\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("gpu_handler_resourceslice_writes_total{operation=\"apply\"} 2"),
            "{text}"
        );
        assert_eq!(metrics.writes(), 3);
    }
}
