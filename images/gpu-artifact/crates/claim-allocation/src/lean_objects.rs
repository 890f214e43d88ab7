//! What the controller's stores keep of each watched object: only what a round reads. Slices are
//! kept by nobody but the engine, in its compact form (see `controller::watch_slices`); the stores
//! keep of a Pod its claims, gates and scheduling state, of a claim not yet allocated what
//! selection and the engine read (allocated claims: see `stored_claims`), and of every object no managedFields (the largest part of most
//! objects, read by nobody here). A list decoded from JSON keeps room for four entries however
//! few it holds (a claim's one request or one result: some 1.7 KB of empty room per claim), so the
//! lists a store keeps are cut to their length.

use k8s_openapi::api::core::v1::{Affinity, Pod, PodSpec, PodStatus};
use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, DeviceRequest, ResourceClaim, ResourceClaimStatus};
use kube::Resource;
use kube::core::ObjectMeta;

use crate::node_fit::{as_pod_level, pod_requests};

/// Drops managedFields: what every stored object loses.
pub fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps of a claim not yet allocated (an allocated one is kept as a `stored_claims::AllocatedClaim`)
/// its identity and version, creation and deletion times, owners, finalizers (written back beside
/// the scheduler's when it is allocated), spec and status, of its prepared devices only which they
/// are. Every list is cut to its length.
pub fn lean_claim(claim: &mut ResourceClaim) {
    let metadata = std::mem::take(&mut claim.metadata);
    claim.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        creation_timestamp: metadata.creation_timestamp,
        deletion_timestamp: metadata.deletion_timestamp,
        owner_references: metadata.owner_references.map(exact),
        finalizers: metadata.finalizers.map(exact),
        ..ObjectMeta::default()
    };
    if let Some(devices) = claim.spec.devices.as_mut() {
        devices.constraints = devices.constraints.take().map(exact);
        devices.config = devices.config.take().map(exact);
        let requests = devices.requests.take().unwrap_or_default();
        devices.requests = Some(exact(requests.into_iter().map(lean_request).collect()));
    }
    if let Some(status) = claim.status.take() {
        claim.status = Some(lean_status(status));
    }
}

fn exact<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

fn lean_request(mut request: DeviceRequest) -> DeviceRequest {
    if let Some(exactly) = request.exactly.as_mut() {
        exactly.selectors = exactly.selectors.take().map(exact);
        exactly.tolerations = exactly.tolerations.take().map(exact);
    }
    request.first_available = request.first_available.map(|subs| {
        exact(
            subs.into_iter()
                .map(|mut sub| {
                    sub.selectors = sub.selectors.map(exact);
                    sub.tolerations = sub.tolerations.map(exact);
                    sub
                })
                .collect(),
        )
    });
    request
}

fn lean_status(mut status: ResourceClaimStatus) -> ResourceClaimStatus {
    status.reserved_for = status.reserved_for.map(exact);
    status.devices = status.devices.map(|devices| {
        exact(
            devices
                .into_iter()
                .map(|d| AllocatedDeviceStatus {
                    driver: d.driver,
                    pool: d.pool,
                    device: d.device,
                    share_id: d.share_id,
                    ..AllocatedDeviceStatus::default()
                })
                .collect(),
        )
    });
    status
}

/// Keeps of a Pod what selection, the gate removal and the choice of its node read: its identity
/// and version, deletion, claims, scheduling gates, node constraints (name, selector, required node
/// affinity, tolerations), claim statuses, phase and PodScheduled condition, and of its containers,
/// init containers, overhead and pod-level resources only the CPU and memory they request in all
/// (`node_fit::pod_requests`), kept as pod-level requests (which `pod_requests` reads back alike);
/// and what preemption weighs (`preemption_search`): its priority, start time and a
/// `preemptionPolicy` of `Never` (the default, `PreemptLowerPriority`, is dropped: a string on every
/// Pod). Priority and start time live inline in `PodSpec`/`PodStatus`: keeping them costs no memory.
///
/// A bound Pod (one with a node name) keeps no node constraints and no PodScheduled condition:
/// only Pods not bound yet are matched to nodes (`pod_nodes`) or told apart as unschedulable
/// (`selection`), and the API server refuses a node name beside a scheduling gate ("cannot be set
/// until all schedulingGates have been cleared"), so no gated Pod is bound. Most Pods of a cluster
/// are bound: the `controller_memory` bench's Pod, bound, kept 3,059 bytes before and 2,453 now,
/// 2,248 of them the size of `Pod` itself (counted by a global allocator, 10,000 Pods).
pub fn lean_pod(pod: &mut Pod) {
    let metadata = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        uid: metadata.uid,
        resource_version: metadata.resource_version,
        deletion_timestamp: metadata.deletion_timestamp,
        ..ObjectMeta::default()
    };
    let spec = pod.spec.take().unwrap_or_default();
    let unbound = spec.node_name.is_none();
    let requests = as_pod_level(pod_requests(&spec));
    let node_affinity = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .filter(|_| unbound)
        .map(|node_affinity| Affinity {
            node_affinity: Some(node_affinity),
            ..Affinity::default()
        });
    pod.spec = Some(PodSpec {
        resources: requests,
        resource_claims: spec.resource_claims.map(exact),
        scheduling_gates: spec.scheduling_gates.map(exact),
        node_name: spec.node_name,
        node_selector: spec.node_selector.filter(|_| unbound),
        affinity: node_affinity,
        tolerations: spec.tolerations.filter(|_| unbound).map(exact),
        priority: spec.priority,
        preemption_policy: spec.preemption_policy.filter(|p| p == "Never"),
        ..PodSpec::default()
    });
    let status = pod.status.take().unwrap_or_default();
    let conditions = status
        .conditions
        .filter(|_| unbound)
        .map(|all| exact(all.into_iter().filter(|c| c.type_ == "PodScheduled").collect()));
    pod.status = Some(PodStatus {
        resource_claim_statuses: status.resource_claim_statuses.map(exact),
        phase: status.phase,
        conditions,
        start_time: status.start_time,
        // A preemptor's hold, read back by a new leader (`Preemptions::adopt`).
        nominated_node_name: status.nominated_node_name,
        ..PodStatus::default()
    });
}

#[cfg(test)]
#[path = "lean_objects_tests.rs"]
mod tests;
