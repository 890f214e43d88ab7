//! GPU time per tenant: `gpu_dra_allocations_total{class,namespace}` counts the devices of our
//! driver that claims were allocated, and `gpu_dra_allocation_seconds_total{class,namespace}` the
//! seconds they held them, from the allocation to the release (the claim deallocated or deleted).
//! One allocation result is one device: a share of a shared card counts as one device too (the
//! class says what kind).
//!
//! Both are derived from the claims the watch reports, on every replica, leader or not: the claim
//! store hands each change to [`AllocationClock::changed`], so the clock follows what the API server
//! stores, not what this replica allocated, and keeps nothing per claim (a count of devices per
//! class and namespace, and the seconds accrued so far). A claim already allocated when the first
//! list arrives is running, not new: its seconds accrue from then and it is not counted as an
//! allocation. A new process so starts both counters at zero, which Prometheus reads as a counter
//! reset (`increase` and `rate` add from zero again): a restart never counts a running claim's
//! earlier time twice, and loses only the seconds between the old process's last scrape and the
//! new one's first list. Queries take `max by (class, namespace)` over the replicas, each of which
//! counts the whole cluster, so one replica restarting loses nothing while the other runs.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use crate::stored_claims::{AllocatedClaim, StoredClaim};

pub const ALLOCATIONS_METRIC: &str = "gpu_dra_allocations";
pub const SECONDS_METRIC: &str = "gpu_dra_allocation_seconds";

/// Who is charged: the class a result was allocated from (the GPUClass's name for classes the
/// module renders) and the claim's namespace.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct TenantLabels {
    pub class: String,
    pub namespace: String,
}

/// One class and namespace: how many devices it holds now, and what it accrued until `since`.
#[derive(Debug, Default, Clone, Copy)]
struct Accrual {
    devices: u64,
    allocations: u64,
    seconds: f64,
    since: Option<Instant>,
}

impl Accrual {
    /// The seconds held until `now`.
    fn seconds_at(&self, now: Instant) -> f64 {
        let running = self
            .since
            .map_or(0.0, |since| now.saturating_duration_since(since).as_secs_f64());
        self.seconds + self.devices as f64 * running
    }

    /// Accrues until `now`, so the device count may change from `now` on.
    fn settle(&mut self, now: Instant) {
        self.seconds = self.seconds_at(now);
        self.since = Some(now);
    }
}

#[derive(Debug, Default)]
struct Ledger {
    tenants: BTreeMap<TenantLabels, Accrual>,
    /// The first full list has been seen: from then on a newly allocated claim is an allocation.
    listed: bool,
}

/// The devices of our driver a stored claim holds, by tenant (nothing unless allocated).
fn holdings(claim: Option<&StoredClaim>) -> BTreeMap<TenantLabels, u64> {
    let mut held = BTreeMap::new();
    if let Some(claim) = claim.and_then(StoredClaim::allocated) {
        for device in &claim.held {
            *held.entry(tenant(claim, &device.request)).or_insert(0) += 1;
        }
    }
    held
}

fn tenant(claim: &AllocatedClaim, request: &str) -> TenantLabels {
    TenantLabels {
        class: claim.class_of(request).unwrap_or("unknown").to_owned(),
        namespace: claim.namespace.to_string(),
    }
}

/// Whether `before` and `after` are one allocation (the same claim, still holding the same
/// devices): an allocation cannot change once written, only be cleared and written again.
fn same_allocation(before: Option<&StoredClaim>, after: Option<&StoredClaim>) -> bool {
    match (
        before.and_then(StoredClaim::allocated),
        after.and_then(StoredClaim::allocated),
    ) {
        (Some(before), Some(after)) => before.uid == after.uid && before.held == after.held,
        (None, None) => true,
        _ => false,
    }
}

impl Ledger {
    fn changed(&mut self, before: Option<&StoredClaim>, after: Option<&StoredClaim>, now: Instant) {
        if same_allocation(before, after) {
            return;
        }
        for (labels, devices) in holdings(before) {
            let accrual = self.tenants.entry(labels).or_default();
            accrual.settle(now);
            accrual.devices = accrual.devices.saturating_sub(devices);
        }
        for (labels, devices) in holdings(after) {
            let accrual = self.tenants.entry(labels).or_default();
            accrual.settle(now);
            accrual.devices += devices;
            if self.listed {
                accrual.allocations += devices;
            }
        }
    }
}

/// The clock: fed by the claim store, read at every scrape. Cheap to clone (one shared ledger).
#[derive(Clone, Debug, Default)]
pub struct AllocationClock {
    ledger: Arc<Mutex<Ledger>>,
}

impl AllocationClock {
    /// Registers both counters, computed at scrape time from the returned clock.
    pub fn register(registry: &mut Registry) -> Self {
        let clock = Self::default();
        registry.register_collector(Box::new(clock.clone()));
        clock
    }

    /// One claim changed at `now` (`None`: absent before, or deleted).
    pub fn changed(&self, before: Option<&StoredClaim>, after: Option<&StoredClaim>, now: Instant) {
        self.ledger
            .lock()
            .expect("allocation clock")
            .changed(before, after, now);
    }

    /// A full list replaced the store (`before`, by key) with `after` at `now`: every claim that
    /// differs is a change. The first list only starts the clock of what is already allocated.
    pub fn listed(&self, before: &HashMap<String, StoredClaim>, after: &HashMap<String, StoredClaim>, now: Instant) {
        let mut ledger = self.ledger.lock().expect("allocation clock");
        for (key, claim) in after {
            ledger.changed(before.get(key), Some(claim), now);
        }
        for (_, claim) in before.iter().filter(|(key, _)| !after.contains_key(*key)) {
            ledger.changed(Some(claim), None, now);
        }
        ledger.listed = true;
    }

    /// Allocations and seconds by tenant at `now`.
    pub fn read(&self, now: Instant) -> BTreeMap<TenantLabels, (u64, f64)> {
        let ledger = self.ledger.lock().expect("allocation clock");
        ledger
            .tenants
            .iter()
            .map(|(labels, accrual)| (labels.clone(), (accrual.allocations, accrual.seconds_at(now))))
            .collect()
    }
}

impl Collector for AllocationClock {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let allocations = Family::<TenantLabels, Counter>::default();
        let seconds = Family::<TenantLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        for (labels, (count, held)) in self.read(Instant::now()) {
            allocations.get_or_create(&labels).inc_by(count);
            seconds.get_or_create(&labels).inc_by(held);
        }
        allocations.encode(encoder.encode_descriptor(
            ALLOCATIONS_METRIC,
            "Devices of the gpu.deckhouse.io driver allocated to claims (whoever allocated them), by class and namespace, since this replica started",
            None,
            allocations.metric_type(),
        )?)?;
        seconds.encode(encoder.encode_descriptor(
            SECONDS_METRIC,
            "Seconds devices of the gpu.deckhouse.io driver were held by claims, from allocation to release, by class and namespace, since this replica started",
            None,
            seconds.metric_type(),
        )?)
    }
}

#[cfg(test)]
#[path = "allocation_clock_tests.rs"]
mod tests;
