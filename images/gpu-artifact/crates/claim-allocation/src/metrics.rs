//! The controller's metrics: what is allocated (by class, device type and node, whoever allocated
//! it), how long our allocations took, every broken invariant, and GPU time by class and namespace
//! (`allocation_clock`).

use std::collections::BTreeMap;

use dra_allocator::{Allocator, GPU_DRIVER};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::allocation_clock::AllocationClock;
use crate::stored_claims::AllocatedClaim;

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
#[allow(non_snake_case)]
pub struct AllocationLabels {
    pub class: String,
    /// The metric's label is `deviceType`, like the device attribute it comes from.
    pub deviceType: String,
    pub node: String,
}

/// How a preemption ended: `evicted` (its victims were evicted) or `blocked` (a
/// PodDisruptionBudget refused an eviction it needed).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct PreemptionLabels {
    pub outcome: String,
}

#[derive(Clone)]
pub struct Metrics {
    pub allocations: Family<AllocationLabels, Gauge>,
    pub latency: Histogram,
    pub violations: Counter,
    pub ignored_slices: Gauge,
    /// Claims whose allocation or explanation panicked in the engine (each skipped until it changes).
    pub panics: Counter,
    /// Claims deallocated because a device they held was also held by another claim.
    pub repairs: Counter,
    /// Preemptions for gated Pods (see `preemption`).
    pub preemptions: Family<PreemptionLabels, Counter>,
    /// GPU time by class and namespace, fed by the claim watch (see `allocation_clock`).
    pub clock: AllocationClock,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            allocations: Family::default(),
            latency: Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]),
            violations: Counter::default(),
            ignored_slices: Gauge::default(),
            panics: Counter::default(),
            repairs: Counter::default(),
            preemptions: Family::default(),
            clock: AllocationClock::register(registry),
        };
        registry.register(
            "gpu_dra_claim_allocations",
            "Allocated device results of the gpu.deckhouse.io driver, whoever allocated them",
            metrics.allocations.clone(),
        );
        registry.register(
            "gpu_dra_allocation_latency_seconds",
            "Time from a claim's creation to the allocation this controller wrote",
            metrics.latency.clone(),
        );
        registry.register(
            "gpu_dra_invariant_violations",
            "Allocated devices that break a safety invariant, counted once per claim and device",
            metrics.violations.clone(),
        );
        registry.register(
            "gpu_dra_ignored_slices",
            "ResourceSlices skipped because they are malformed",
            metrics.ignored_slices.clone(),
        );
        registry.register(
            "gpu_dra_allocation_panics",
            "Claims whose allocation panicked in the engine; each is skipped until it changes",
            metrics.panics.clone(),
        );
        registry.register(
            "gpu_dra_double_allocations_repaired",
            "Claims deallocated to be allocated again because a device they held was held by another claim",
            metrics.repairs.clone(),
        );
        registry.register(
            "gpu_dra_preemptions",
            "Preemptions for gated GPU Pods: evicted (victims evicted) or blocked (a PodDisruptionBudget refused)",
            metrics.preemptions.clone(),
        );
        metrics
    }

    /// Replaces the allocation gauges with `counts`.
    pub fn set_allocations(&self, counts: &BTreeMap<AllocationLabels, i64>) {
        self.allocations.clear();
        for (labels, count) in counts {
            self.allocations.get_or_create(labels).set(*count);
        }
    }
}

/// The attributes a device's type is read from (qualified or not).
const DEVICE_TYPE_ATTRIBUTES: [&str; 2] = ["gpu.deckhouse.io/deviceType", "deviceType"];

/// Counts allocated results of our driver by (class, device type, node). The device type and node
/// are the engine's (from the published slices); a device no usable pool publishes counts as
/// `unknown`.
pub fn allocation_counts<'a>(
    claims: impl IntoIterator<Item = &'a AllocatedClaim>,
    engine: &Allocator,
) -> BTreeMap<AllocationLabels, i64> {
    let mut counts = BTreeMap::new();
    for claim in claims {
        for held in &claim.held {
            let (device_type, node) = engine
                .device_labels(GPU_DRIVER, &held.pool, &held.device, &DEVICE_TYPE_ATTRIBUTES)
                .map_or(("unknown", "unknown"), |(device_type, node)| {
                    (device_type.unwrap_or("unknown"), node.unwrap_or_default())
                });
            let labels = AllocationLabels {
                class: claim.class_of(&held.request).unwrap_or("unknown").to_owned(),
                deviceType: device_type.to_owned(),
                node: node.to_owned(),
            };
            *counts.entry(labels).or_insert(0) += 1;
        }
    }
    counts
}

/// Adds `more` to `counts`, label by label.
pub fn add_counts(counts: &mut BTreeMap<AllocationLabels, i64>, more: BTreeMap<AllocationLabels, i64>) {
    for (labels, count) in more {
        *counts.entry(labels).or_insert(0) += count;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
    use serde_json::json;

    #[test]
    fn counts_results_by_class_device_type_and_node() {
        let slice: ResourceSlice = serde_json::from_value(json!({
            "metadata": {"name": "s"},
            "spec": {"driver": "gpu.deckhouse.io", "nodeName": "w1", "pool": {"name": "gpus/w1", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu0", "attributes": {"gpu.deckhouse.io/deviceType": {"string": "MIG"}}}]}
        }))
        .unwrap();
        let claim = |name: &str, request: &str| -> ResourceClaim {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "mig-1g"}},
                    {"name": "alt", "firstAvailable": [{"name": "big", "deviceClassName": "a100"}]}]}},
                "status": {"allocation": {"devices": {"results": [
                    {"request": request, "driver": "gpu.deckhouse.io", "pool": "gpus/w1", "device": "gpu0"},
                    {"request": request, "driver": "gpu.deckhouse.io", "pool": "gpus/w1", "device": "gone"},
                    {"request": request, "driver": "other.example.com", "pool": "p", "device": "d"}]}}}
            }))
            .unwrap()
        };
        let claims = [claim("a", "gpu"), claim("b", "gpu"), claim("c", "alt/big")].map(|c| AllocatedClaim::of(&c));
        let counts = allocation_counts(&claims, &Allocator::new(&[slice], &[], &[]));
        let mig = AllocationLabels {
            class: "mig-1g".into(),
            deviceType: "MIG".into(),
            node: "w1".into(),
        };
        let sub = AllocationLabels {
            class: "a100".into(),
            deviceType: "MIG".into(),
            node: "w1".into(),
        };
        let gone = |class: &str| AllocationLabels {
            class: class.into(),
            deviceType: "unknown".into(),
            node: "unknown".into(),
        };
        assert_eq!(
            counts,
            BTreeMap::from([(mig, 2), (sub, 1), (gone("mig-1g"), 2), (gone("a100"), 1)]),
            "other drivers are not counted; a device no slice publishes is unknown"
        );
    }
}
