//! The publisher's metrics: what the node offers (`gpu_dra_resourceslice_offers`, by card, device
//! type and MIG profile), whether offers are reduced (and why), and how often it writes slices.

use std::collections::BTreeMap;

use dra_offers::DeviceCatalog;
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

/// One kind of offer of one card: `deviceType` `Physical` (whole cards, shared or not) or `MIG`,
/// `profile` the MIG profile's name (empty for a whole card).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct OfferLabels {
    pub node: String,
    pub physicalgpu: String,
    pub deviceType: String,
    pub profile: String,
}

#[derive(Clone, Default)]
pub struct PublicationMetrics {
    pub offers: Family<OfferLabels, Gauge>,
    pub offers_reduced: Family<ReducedLabels, Gauge>,
    pub slice_writes: Family<WriteLabels, Counter>,
}

impl PublicationMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "gpu_dra_resourceslice_offers",
            "Devices the node publishes in its ResourceSlices (the API server kept them), by card, device type and MIG profile",
            metrics.offers.clone(),
        );
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

    /// Replaces the offer counts with what `node` publishes now.
    pub(crate) fn set_offers(&self, node: &str, published: &DeviceCatalog) {
        let mut counts: BTreeMap<OfferLabels, i64> = BTreeMap::new();
        for device in published.values() {
            let labels = OfferLabels {
                node: node.to_owned(),
                physicalgpu: device.physical_gpu().to_owned(),
                deviceType: device.device_type().to_owned(),
                profile: device.profile().to_owned(),
            };
            *counts.entry(labels).or_insert(0) += 1;
        }
        self.offers.clear();
        for (labels, count) in counts {
            self.offers.get_or_create(&labels).set(count);
        }
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

    #[test]
    fn offers_are_counted_by_card_device_type_and_profile_and_replaced_on_each_pass() {
        use dra_offers::OfferedDevice;
        use gpu_vendor::MigPlacement;
        let mut registry = Registry::default();
        let metrics = PublicationMetrics::register(&mut registry);
        let card = "0000:01:00.0".parse().unwrap();
        let whole = OfferedDevice::Physical {
            pci_address: card,
            uuid: "GPU-a".into(),
            physical_gpu: "w1-0-10de-20b7".into(),
        };
        let mig = |start: u32| OfferedDevice::Mig {
            pci_address: card,
            parent_uuid: "GPU-a".into(),
            physical_gpu: "w1-0-10de-20b7".into(),
            profile_id: 0,
            profile_name: "1g.6gb".into(),
            placement: MigPlacement { start, size: 1 },
        };
        let catalog = DeviceCatalog::from([
            ("gpu0".to_owned(), whole),
            ("gpu0-mig-1g6gb-0".to_owned(), mig(0)),
            ("gpu0-mig-1g6gb-1".to_owned(), mig(1)),
        ]);
        metrics.set_offers("w1", &catalog);
        let text = component_base::metrics_text(&registry).unwrap();
        for line in [
            r#"gpu_dra_resourceslice_offers{node="w1",physicalgpu="w1-0-10de-20b7",deviceType="Physical",profile=""} 1"#,
            r#"gpu_dra_resourceslice_offers{node="w1",physicalgpu="w1-0-10de-20b7",deviceType="MIG",profile="1g.6gb"} 2"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
        metrics.set_offers("w1", &DeviceCatalog::new());
        let text = component_base::metrics_text(&registry).unwrap();
        assert!(
            !text.contains("gpu_dra_resourceslice_offers{"),
            "a withdrawn card leaves no series: {text}"
        );
    }
}
