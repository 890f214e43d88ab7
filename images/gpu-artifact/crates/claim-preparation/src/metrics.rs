//! The handler's claim metrics: every prepare and unprepare the kubelet asked for, by outcome and
//! duration; prepare failures by the kind of device (`gpu_dra_prepare_failures_total{reason,
//! deviceType,vendor}`); and what the checkpoint holds afterwards: how many claims are prepared and,
//! per prepared device, the card it is on, so a dashboard can join dcgm-exporter's series (`UUID`,
//! `GPU_I_ID` for a MIG instance) to the claim that holds the card and to the Pods and containers
//! that use it ([`pod_devices`]).
//!
//! Labels are bounded: an operation's `reason` is a [`FailureReason`]; claim and Pod names appear
//! only in `gpu_handler_prepared_device_info` and `gpu_handler_pod_device_info`, one series per
//! prepared device (and container using it), gone with the claim.

mod pod_devices;

pub use pod_devices::NodePods;

use std::collections::BTreeMap;
use std::time::Duration;

use dra_offers::DeviceCatalog;
use k8s_openapi::api::resource::v1::ResourceClaim;
use node_prepare::{CheckpointClaim, CheckpointDevice, ClaimState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::failure::FailureReason;
use pod_devices::{PodDeviceCollector, PreparedDevice, pod_devices};

/// Which kubelet call a claim operation answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOperation {
    Prepare,
    Unprepare,
}

impl ClaimOperation {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::Unprepare => "unprepare",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: &'static str,
    /// `success` or `failure`.
    result: &'static str,
    /// Empty on success (Prometheus drops empty labels).
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    operation: &'static str,
}

/// `UUID` and `GPU_I_ID` are spelled as dcgm-exporter spells them, so `on (UUID, GPU_I_ID)` joins.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
#[allow(non_snake_case)]
struct PreparedDeviceLabels {
    claim_namespace: String,
    claim: String,
    device: String,
    physicalgpu: String,
    /// The card's UUID (a MIG device's parent card).
    UUID: String,
    /// The MIG device's GPU instance id; empty for a whole card.
    GPU_I_ID: String,
    /// The MIG device's own UUID; empty for a whole card.
    MIG_UUID: String,
}

/// What kind of device a prepare failed for: `deviceType` and `vendor` as the device's attributes
/// say (`unknown` when the claim could not be read or names no device this node offers).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
#[allow(non_snake_case)]
pub(crate) struct FailureLabels {
    pub reason: &'static str,
    pub deviceType: String,
    pub vendor: String,
}

type DurationFamily = Family<DurationLabels, Histogram, fn() -> Histogram>;

/// Up to the kubelet's 45 s timeout of a prepare call; MIG creation and VFIO binding take seconds.
fn duration_histogram() -> Histogram {
    Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 45.0, 90.0])
}

#[derive(Clone)]
pub struct ClaimMetrics {
    operations: Family<OperationLabels, Counter>,
    durations: DurationFamily,
    prepared_claims: Gauge,
    prepared_devices: Family<PreparedDeviceLabels, Gauge>,
    checkpoint_corrupt: Gauge,
    mps_daemon_restarts: Counter,
    foreign_mig_instances: Gauge,
    prepare_failures: Family<FailureLabels, Counter>,
    pod_devices: PodDeviceCollector,
}

impl ClaimMetrics {
    /// Registers the metrics; the returned [`NodePods`] keeps the Pod cache the per-Pod series read.
    pub fn register(registry: &mut Registry) -> (Self, NodePods) {
        let (pod_devices, node_pods) = pod_devices();
        let metrics = Self {
            operations: Family::default(),
            durations: Family::new_with_constructor(duration_histogram),
            prepared_claims: Gauge::default(),
            prepared_devices: Family::default(),
            checkpoint_corrupt: Gauge::default(),
            mps_daemon_restarts: Counter::default(),
            foreign_mig_instances: Gauge::default(),
            prepare_failures: Family::default(),
            pod_devices,
        };
        registry.register(
            "gpu_handler_claim_operations",
            "Claim prepares and unprepares the kubelet asked for, by result; reason names the failing step or error kind",
            metrics.operations.clone(),
        );
        registry.register(
            "gpu_handler_claim_operation_duration_seconds",
            "Time a claim prepare or unprepare took, API reads and the node's pipeline together",
            metrics.durations.clone(),
        );
        registry.register(
            "gpu_handler_prepared_claims",
            "Claims the node's checkpoint records as prepared",
            metrics.prepared_claims.clone(),
        );
        registry.register(
            "gpu_handler_prepared_device_info",
            "1 for every device of a prepared claim, with the card it is on (join dcgm-exporter on UUID and GPU_I_ID)",
            metrics.prepared_devices.clone(),
        );
        registry.register(
            "gpu_handler_checkpoint_corrupt",
            "1 while the node's checkpoint fails verification: every prepare and unprepare on the node fails until an admin recovers it",
            metrics.checkpoint_corrupt.clone(),
        );
        registry.register(
            "gpu_handler_mps_daemon_restarts",
            "MPS control daemons of cards with prepared MPS shares found dead and started again",
            metrics.mps_daemon_restarts.clone(),
        );
        registry.register(
            "gpu_handler_foreign_mig_instances",
            "MIG instances on the node's cards that no prepared claim records, kept (an admin's, or a lost checkpoint's) at the last start",
            metrics.foreign_mig_instances.clone(),
        );
        registry.register(
            "gpu_dra_prepare_failures",
            "Failed claim prepares by reason and by the deviceType and vendor of each kind of device the claim holds on the node",
            metrics.prepare_failures.clone(),
        );
        registry.register_collector(Box::new(metrics.pod_devices.clone()));
        (metrics, node_pods)
    }

    /// Counts one failed prepare of `reason` for each (deviceType, vendor) of the claim's devices.
    pub(crate) fn count_prepare_failure(&self, reason: FailureReason, kinds: &[(String, String)]) {
        for (device_type, vendor) in kinds {
            let labels = FailureLabels {
                reason: reason.as_str(),
                deviceType: device_type.clone(),
                vendor: vendor.clone(),
            };
            self.prepare_failures.get_or_create(&labels).inc();
        }
    }

    /// Whether the last checkpoint read failed verification.
    pub(crate) fn set_checkpoint_corrupt(&self, corrupt: bool) {
        self.checkpoint_corrupt.set(i64::from(corrupt));
    }

    pub(crate) fn count_mps_restarts(&self, restarted: usize) {
        self.mps_daemon_restarts.inc_by(restarted as u64);
    }

    pub(crate) fn set_foreign_mig_instances(&self, count: usize) {
        self.foreign_mig_instances.set(count as i64);
    }

    /// Counts one operation that took `took`; `failure` is its reason when it failed.
    pub(crate) fn record(&self, operation: ClaimOperation, took: Duration, failure: Option<FailureReason>) {
        let labels = OperationLabels {
            operation: operation.as_str(),
            result: if failure.is_some() { "failure" } else { "success" },
            reason: failure.map(FailureReason::as_str).unwrap_or_default(),
        };
        self.operations.get_or_create(&labels).inc();
        self.durations
            .get_or_create(&DurationLabels {
                operation: operation.as_str(),
            })
            .observe(took.as_secs_f64());
    }

    /// Replaces the checkpoint gauges with `claims` (by UID), counting only completed claims: a
    /// started one is either in progress or rolled back at the next start.
    pub(crate) fn set_checkpoint(&self, claims: &BTreeMap<String, CheckpointClaim>) {
        let completed: Vec<&CheckpointClaim> = claims
            .values()
            .filter(|claim| claim.state == ClaimState::PrepareCompleted)
            .collect();
        self.prepared_claims.set(completed.len() as i64);
        self.prepared_devices.clear();
        let mut prepared = Vec::new();
        for claim in completed {
            for device in &claim.devices {
                let labels = device_labels(claim, device);
                self.prepared_devices.get_or_create(&labels).set(1);
                prepared.push(PreparedDevice {
                    namespace: labels.claim_namespace,
                    claim: labels.claim,
                    request: device.request.clone(),
                    device: labels.device,
                    physicalgpu: labels.physicalgpu,
                    uuid: labels.UUID,
                    gpu_instance_id: labels.GPU_I_ID,
                    mig_uuid: labels.MIG_UUID,
                });
            }
        }
        if let Ok(mut shown) = self.pod_devices.prepared.lock() {
            *shown = prepared;
        }
    }
}

/// The (deviceType, vendor) of each kind of device `claim` holds of `driver` in `pool`, as the
/// node's `catalog` describes them; `unknown` for a device it does not offer, and one `unknown`
/// pair when the claim was not read or holds nothing here.
pub(crate) fn device_kinds(
    claim: Option<&ResourceClaim>,
    driver: &str,
    pool: &str,
    catalog: &DeviceCatalog,
) -> Vec<(String, String)> {
    let unknown = || ("unknown".to_owned(), "unknown".to_owned());
    let results = claim
        .and_then(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref())
        .and_then(|d| d.results.as_ref());
    let mut kinds: Vec<(String, String)> = results
        .into_iter()
        .flatten()
        .filter(|r| r.driver == driver && r.pool == pool)
        .map(|r| {
            catalog
                .get(&r.device)
                .map_or_else(unknown, |d| (d.device_type().to_owned(), d.vendor().to_owned()))
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    if kinds.is_empty() {
        kinds.push(unknown());
    }
    kinds
}

fn device_labels(claim: &CheckpointClaim, device: &CheckpointDevice) -> PreparedDeviceLabels {
    let instance = device.mig_instance.as_ref();
    PreparedDeviceLabels {
        claim_namespace: claim.namespace.clone(),
        claim: claim.name.clone(),
        device: device.device.clone(),
        physicalgpu: device.target.physical_gpu().to_owned(),
        UUID: device.target.card_uuid().to_owned(),
        GPU_I_ID: instance.map(|i| i.gpu_instance_id.to_string()).unwrap_or_default(),
        MIG_UUID: instance.map(|i| i.uuid.clone()).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
