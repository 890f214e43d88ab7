//! What the controller's stores keep of each watched object: only what a round reads. Slices are
//! kept by nobody but the engine, in its compact form (see `controller::watch_slices`), and Pods
//! as `lean_pod::LeanPod`s; the stores keep of a claim not yet allocated what selection and the
//! engine read (allocated claims: see `stored_claims`), and of every object no managedFields (the
//! largest part of most objects, read by nobody here). A list decoded from JSON keeps room for four entries however
//! few it holds (a claim's one request or one result: some 1.7 KB of empty room per claim), so the
//! lists a store keeps are cut to their length.

use k8s_openapi::api::resource::v1::{AllocatedDeviceStatus, DeviceRequest, ResourceClaim, ResourceClaimStatus};
use kube::Resource;
use kube::core::ObjectMeta;

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

/// `list` without spare room.
pub(crate) fn exact<T>(mut list: Vec<T>) -> Vec<T> {
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

#[cfg(test)]
#[path = "lean_objects_tests.rs"]
mod tests;
