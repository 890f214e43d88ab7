//! Per-Pod attribution of prepared devices: `gpu_handler_pod_device_info`, 1 for every container of
//! a Pod on this node that uses a prepared device, with the Pod's `namespace`, `pod` and
//! `container` (named as kube-state-metrics and dcgm-exporter name them) and the device's card
//! `UUID`, `GPU_I_ID` and `MIG_UUID`. dcgm-exporter labels its series by `UUID` (and `GPU_I_ID` for a
//! MIG device) but cannot map our driver's claims to Pods, so `on (UUID, GPU_I_ID)` joins its
//! utilisation to the Pod and container here.
//!
//! Computed at scrape time from two things the handler already has: the prepared devices of the
//! checkpoint (set after every operation) and the node's Pods (a watch on `spec.nodeName`). A Pod
//! names its claims in `spec.resourceClaims` (a claim by name) or `status.resourceClaimStatuses`
//! (a claim made from a template) or `status.extendedResourceClaimStatus` (the claim the scheduler
//! made for an extended resource); a container uses a claim through `resources.claims` (every
//! request, or the one it names) or a request mapping of the extended-resource claim. So the series
//! follow a restart of the handler without any record of their own.

use std::fmt;
use std::sync::{Arc, Mutex};

use component_base::Shutdown;
use controller_plumbing::keep_cache_of;
use k8s_openapi::api::core::v1::{Container, Pod};
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

pub(crate) const POD_DEVICE_METRIC: &str = "gpu_handler_pod_device_info";

/// One prepared device as the attribution needs it: which claim and request it answers, and the
/// labels of the card it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PreparedDevice {
    pub namespace: String,
    pub claim: String,
    /// `request`, or `request/subrequest` for a `firstAvailable` entry.
    pub request: String,
    pub device: String,
    pub physicalgpu: String,
    pub uuid: String,
    pub gpu_instance_id: String,
    pub mig_uuid: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
#[allow(non_snake_case)]
pub(crate) struct PodDeviceLabels {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub claim: String,
    pub device: String,
    pub physicalgpu: String,
    pub UUID: String,
    pub GPU_I_ID: String,
    /// The MIG device's own UUID; empty for a whole card.
    pub MIG_UUID: String,
}

/// The node's Pods, to be kept by [`NodePods::follow`].
pub struct NodePods {
    writer: Writer<Pod>,
}

impl NodePods {
    /// Keeps the cache of Pods bound to `node` until shutdown (RBAC `list` and `watch` on pods).
    pub async fn follow(self, client: Client, node: String, shutdown: Shutdown) {
        let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
        keep_cache_of(Api::<Pod>::all(client), config, self.writer, shutdown, "node's Pods").await;
    }
}

/// The collector and what feeds it: the prepared devices (see `ClaimMetrics::set_checkpoint`) and
/// the Pod cache.
pub(crate) fn pod_devices() -> (PodDeviceCollector, NodePods) {
    let (pods, writer) = reflector::store();
    let collector = PodDeviceCollector {
        prepared: Arc::default(),
        pods,
    };
    (collector, NodePods { writer })
}

#[derive(Clone)]
pub(crate) struct PodDeviceCollector {
    pub prepared: Arc<Mutex<Vec<PreparedDevice>>>,
    pods: Store<Pod>,
}

impl fmt::Debug for PodDeviceCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PodDeviceCollector")
            .field("pods", &self.pods.state().len())
            .finish()
    }
}

impl Collector for PodDeviceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let family = Family::<PodDeviceLabels, Gauge>::default();
        let prepared = self.prepared.lock().map(|p| p.clone()).unwrap_or_default();
        for labels in attribution(&prepared, &self.pods.state()) {
            family.get_or_create(&labels).set(1);
        }
        family.encode(encoder.encode_descriptor(
            POD_DEVICE_METRIC,
            "1 for every container of a Pod using a prepared device, with the card's UUID, GPU_I_ID and MIG_UUID (join dcgm-exporter on UUID and GPU_I_ID)",
            None,
            family.metric_type(),
        )?)
    }
}

/// Every (Pod, container, device) of `prepared` that `pods` use.
pub(crate) fn attribution(prepared: &[PreparedDevice], pods: &[Arc<Pod>]) -> Vec<PodDeviceLabels> {
    let mut series = Vec::new();
    for pod in pods {
        let namespace = pod.namespace().unwrap_or_default();
        for device in prepared.iter().filter(|d| d.namespace == namespace) {
            for container in containers_using(pod, &device.claim, &device.request) {
                series.push(PodDeviceLabels {
                    namespace: namespace.clone(),
                    pod: pod.name_any(),
                    container,
                    claim: device.claim.clone(),
                    device: device.device.clone(),
                    physicalgpu: device.physicalgpu.clone(),
                    UUID: device.uuid.clone(),
                    GPU_I_ID: device.gpu_instance_id.clone(),
                    MIG_UUID: device.mig_uuid.clone(),
                });
            }
        }
    }
    series.sort();
    series.dedup();
    series
}

/// The containers of `pod` that use request `request` of its claim named `claim`.
fn containers_using(pod: &Pod, claim: &str, request: &str) -> Vec<String> {
    let top_request = request.split('/').next().unwrap_or(request);
    let (Some(spec), status) = (pod.spec.as_ref(), pod.status.as_ref()) else {
        return vec![];
    };
    // The Pod's own names for the claim (an entry of spec.resourceClaims).
    let generated = status
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .into_iter()
        .flatten()
        .filter(|s| s.resource_claim_name.as_deref() == Some(claim))
        .map(|s| s.name.as_str());
    let named = spec
        .resource_claims
        .iter()
        .flatten()
        .filter(|c| c.resource_claim_name.as_deref() == Some(claim))
        .map(|c| c.name.as_str());
    let pod_names: Vec<&str> = generated.chain(named).collect();
    let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
    let mut using: Vec<String> = containers
        .filter(|c| uses(c, &pod_names, top_request))
        .map(|c| c.name.clone())
        .collect();
    if let Some(extended) = status.and_then(|s| s.extended_resource_claim_status.as_ref())
        && extended.resource_claim_name == claim
    {
        let mapped = extended
            .request_mappings
            .iter()
            .filter(|m| m.request_name == top_request);
        using.extend(mapped.map(|m| m.container_name.clone()));
    }
    using
}

/// Whether `container` uses `request` of one of the Pod's claim entries `pod_names`.
fn uses(container: &Container, pod_names: &[&str], request: &str) -> bool {
    let claims = container.resources.as_ref().and_then(|r| r.claims.as_ref());
    claims
        .into_iter()
        .flatten()
        .any(|c| pod_names.contains(&c.name.as_str()) && c.request.as_deref().is_none_or(|named| named == request))
}

#[cfg(test)]
#[path = "pod_devices_tests.rs"]
mod tests;
