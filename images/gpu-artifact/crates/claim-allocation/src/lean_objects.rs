//! What the controller's stores keep of each watched object: only what a round reads. Slices are
//! kept by nobody but the engine, in its compact form (see `controller::watch_slices`); the stores
//! keep of a Pod its claims, gates and scheduling state, of a claim what selection, the engine,
//! the audit and the metrics read, and of every object no managedFields (the largest part of most
//! objects, read by nobody here). A list decoded from JSON keeps room for four entries however
//! few it holds (a claim's one request or one result: some 1.7 KB of empty room per claim), so the
//! lists a store keeps are cut to their length.

use k8s_openapi::api::core::v1::{Affinity, Pod, PodSpec, PodStatus};
use k8s_openapi::api::resource::v1::{
    AllocatedDeviceStatus, DeviceRequest, DeviceRequestAllocationResult, DeviceSubRequest, ExactDeviceRequest,
    ResourceClaim, ResourceClaimStatus,
};
use kube::Resource;
use kube::core::ObjectMeta;

/// Drops managedFields: what every stored object loses.
pub fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps of a claim its identity and version, creation and deletion times, owners, spec and status;
/// of an allocated claim's requests only their names and classes (the allocation metrics' labels:
/// nothing allocates it again unless it is deallocated, and then the watch brings it whole), of its
/// allocation which devices and shares it holds and when it was made, of its prepared devices only
/// which they are. Every list is cut to its length.
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
        ..ObjectMeta::default()
    };
    let allocated = claim.status.as_ref().is_some_and(|s| s.allocation.is_some());
    if let Some(devices) = claim.spec.devices.as_mut() {
        devices.constraints = devices.constraints.take().map(exact);
        devices.config = devices.config.take().map(exact);
        let requests = devices.requests.take().unwrap_or_default();
        devices.requests = Some(exact(
            requests
                .into_iter()
                .map(|r| {
                    if allocated {
                        names_and_classes(r)
                    } else {
                        lean_request(r)
                    }
                })
                .collect(),
        ));
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

fn names_and_classes(request: DeviceRequest) -> DeviceRequest {
    DeviceRequest {
        name: request.name,
        exactly: request.exactly.map(|e| ExactDeviceRequest {
            device_class_name: e.device_class_name,
            ..ExactDeviceRequest::default()
        }),
        first_available: request.first_available.map(|subs| {
            exact(
                subs.into_iter()
                    .map(|s| DeviceSubRequest {
                        name: s.name,
                        device_class_name: s.device_class_name,
                        ..DeviceSubRequest::default()
                    })
                    .collect(),
            )
        }),
    }
}

/// Which device a result names, for which request, and whether as a share or with admin access:
/// what the releases, the metrics and the repair read.
fn lean_result(result: DeviceRequestAllocationResult) -> DeviceRequestAllocationResult {
    DeviceRequestAllocationResult {
        request: result.request,
        driver: result.driver,
        pool: result.pool,
        device: result.device,
        share_id: result.share_id,
        admin_access: result.admin_access,
        ..DeviceRequestAllocationResult::default()
    }
}

fn lean_status(mut status: ResourceClaimStatus) -> ResourceClaimStatus {
    if let Some(allocation) = status.allocation.as_mut() {
        if let Some(devices) = allocation.devices.as_mut() {
            devices.results = devices
                .results
                .take()
                .map(|results| exact(results.into_iter().map(lean_result).collect()));
            devices.config = devices.config.take().map(exact);
        }
        // Where the claim's devices are is the engine's to know; a round writes node selectors
        // and reads none from the store.
        allocation.node_selector = None;
    }
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
/// affinity, tolerations), claim statuses and PodScheduled condition.
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
    let node_affinity = spec
        .affinity
        .and_then(|a| a.node_affinity)
        .map(|node_affinity| Affinity {
            node_affinity: Some(node_affinity),
            ..Affinity::default()
        });
    pod.spec = Some(PodSpec {
        resource_claims: spec.resource_claims.map(exact),
        scheduling_gates: spec.scheduling_gates.map(exact),
        node_name: spec.node_name,
        node_selector: spec.node_selector,
        affinity: node_affinity,
        tolerations: spec.tolerations.map(exact),
        ..PodSpec::default()
    });
    let status = pod.status.take().unwrap_or_default();
    let conditions = status
        .conditions
        .map(|all| exact(all.into_iter().filter(|c| c.type_ == "PodScheduled").collect()));
    pod.status = Some(PodStatus {
        resource_claim_statuses: status.resource_claim_statuses.map(exact),
        conditions,
        ..PodStatus::default()
    });
}

#[cfg(test)]
#[path = "lean_objects_tests.rs"]
mod tests;
