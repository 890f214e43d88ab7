//! What the controller's stores keep of each watched object: only what a round reads. The engine
//! gets every event whole before this trimming (see `controller::watch`), so slices are kept in
//! full once, in the engine's compact form; the stores keep of a slice its devices' names and
//! types (for the allocation metrics), of a Pod its claims, gates and scheduling state, and of
//! every object no managedFields (the largest part of most objects, read by nobody here).

use k8s_openapi::api::core::v1::{Affinity, Pod, PodSpec, PodStatus};
use k8s_openapi::api::resource::v1::{Device, ResourceSlice};
use kube::Resource;
use kube::core::ObjectMeta;

/// The attribute the allocation metrics label devices by (qualified or not).
const DEVICE_TYPE_ATTRIBUTES: [&str; 2] = ["gpu.deckhouse.io/deviceType", "deviceType"];

/// Drops managedFields: what every stored object loses.
pub fn without_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Keeps of a slice its driver, pool, node and each device's name and type.
pub fn lean_slice(slice: &mut ResourceSlice) {
    without_managed_fields(slice);
    slice.spec.shared_counters = None;
    for device in slice.spec.devices.iter_mut().flatten() {
        let attributes = device.attributes.take().map(|all| {
            all.into_iter()
                .filter(|(name, _)| DEVICE_TYPE_ATTRIBUTES.contains(&name.as_str()))
                .collect()
        });
        *device = Device {
            name: std::mem::take(&mut device.name),
            attributes,
            ..Device::default()
        };
    }
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
        resource_claims: spec.resource_claims,
        scheduling_gates: spec.scheduling_gates,
        node_name: spec.node_name,
        node_selector: spec.node_selector,
        affinity: node_affinity,
        tolerations: spec.tolerations,
        ..PodSpec::default()
    });
    let status = pod.status.take().unwrap_or_default();
    let conditions = status
        .conditions
        .map(|all| all.into_iter().filter(|c| c.type_ == "PodScheduled").collect());
    pod.status = Some(PodStatus {
        resource_claim_statuses: status.resource_claim_statuses,
        conditions,
        ..PodStatus::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::slices;
    use serde_json::json;

    #[test]
    fn a_slice_keeps_device_names_and_types() {
        let mut slice = slices("n1", 1).remove(0);
        let names: Vec<String> = slice.spec.devices.iter().flatten().map(|d| d.name.clone()).collect();
        lean_slice(&mut slice);
        let kept = serde_json::to_value(&slice.spec).unwrap();
        let first = &kept["devices"][0];
        assert_eq!(
            first,
            &json!({"name": names[0], "attributes": {"gpu.deckhouse.io/deviceType": {"string": "Physical"}}})
        );
        assert_eq!(kept["devices"].as_array().unwrap().len(), names.len());
        assert_eq!(kept["nodeName"], "n1");
        assert_eq!(kept["pool"]["name"], "gpus/n1");
        assert!(kept.get("sharedCounters").is_none());
    }

    #[test]
    fn a_pod_keeps_what_selection_reads() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
                "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], "nodeName": "n1",
                "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
                "affinity": {"podAffinity": {}, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
                "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
            "status": {"phase": "Pending",
                "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                               {"type": "Ready", "status": "False"}],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}}))
        .unwrap();
        lean_pod(&mut pod);
        assert_eq!(
            serde_json::to_value(&pod).unwrap(),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5"},
                "spec": {"containers": [], "nodeName": "n1",
                    "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                        {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
                    "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
                    "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}})
        );
    }
}
