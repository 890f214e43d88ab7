//! Which claims this controller may allocate. Pure: stores in, work out.
//!
//! Only claims a Pod is waiting for: those of Pods whose last scheduling gate is ours. A claim no
//! Pod uses is allocated by nobody, as upstream allocates (kube-controller-manager deallocates a
//! claim when its last consumer stops using it "so that the claim can be allocated again as needed
//! by some future consumer instead of trying to schedule that consumer onto the node that was
//! chosen for the previous consumer", `syncClaim` in `pkg/controller/resourceclaim/controller.go`):
//! allocated ahead of its Pods it would hold a GPU nobody uses, pin its future Pods to a node chosen
//! without them, and be allocated again each time its Pods are gone.

use std::collections::HashMap;
use std::sync::Arc;

use dra_allocator::GPU_DRIVER;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::ResourceExt;

use crate::lean_pod::LeanPod;
use crate::stored_claims::StoredClaim;

/// Pods with this scheduling gate wait for us to allocate their claims.
pub use gpu_api::labels::SCHEDULING_GATE;

/// True when our gate is the Pod's last scheduling gate: only then is the Pod ours to allocate.
/// Another gate means another actor holds the Pod (Kueue's `kueue.x-k8s.io/admission` until its
/// queue admits it): GPUs allocated to it then would sit idle while Pods that could run wait.
pub fn gate_is_last(pod: &Pod) -> bool {
    only_our_gates(
        pod.spec
            .iter()
            .flat_map(|s| s.scheduling_gates.iter().flatten())
            .map(|g| g.name.as_str()),
    )
}

/// True when `gates` (a Pod's scheduling gate names) are ours alone, and there is one.
pub fn only_our_gates<'a>(mut gates: impl Iterator<Item = &'a str>) -> bool {
    let first = gates.next();
    first == Some(SCHEDULING_GATE) && gates.all(|g| g == SCHEDULING_GATE)
}

/// A Pod whose last gate is ours, and its claims, all created and none allocated yet.
pub struct GatedPod {
    pub pod: Arc<LeanPod>,
    pub claims: Vec<Arc<ResourceClaim>>,
}

#[derive(Default)]
pub struct Work {
    pub gated: Vec<GatedPod>,
    /// Unallocated claims of our driver whose (ungated) Pod the scheduler found unschedulable,
    /// with the Pod: not ours to allocate, but their users are told why they fit nowhere.
    pub unschedulable: Vec<(Arc<LeanPod>, Arc<ResourceClaim>)>,
}

/// A class is ours when it selects our driver or configures it; claims of other drivers are left
/// to their own controllers.
pub fn is_our_class(class: &DeviceClass) -> bool {
    let selects = class.spec.selectors.iter().flatten().any(|s| {
        s.cel
            .as_ref()
            .is_some_and(|cel| cel.expression.contains(&format!("\"{GPU_DRIVER}\"")))
    });
    let configures = class
        .spec
        .config
        .iter()
        .flatten()
        .any(|c| c.opaque.as_ref().is_some_and(|o| o.driver == GPU_DRIVER));
    selects || configures
}

fn class_names(claim: &ResourceClaim) -> Vec<&str> {
    let mut names = vec![];
    for request in claim.spec.devices.iter().flat_map(|d| d.requests.iter().flatten()) {
        if let Some(exact) = &request.exactly {
            names.push(exact.device_class_name.as_str());
        }
        for sub in request.first_available.iter().flatten() {
            names.push(sub.device_class_name.as_str());
        }
    }
    names
}

/// True when any request of `claim` names one of our classes, or a class that does not exist: no
/// driver can allocate such a claim, and its user must hear why (once, as an Event).
pub fn is_our_claim(claim: &ResourceClaim, classes: &HashMap<String, Arc<DeviceClass>>) -> bool {
    class_names(claim)
        .iter()
        .any(|name| classes.get(*name).is_none_or(|c| is_our_class(c)))
}

/// The claim names a Pod uses, directly or made from its templates (as the controller-manager
/// reports them in the Pod's status).
fn pod_claim_names(pod: &LeanPod) -> (Vec<String>, bool) {
    let mut names = vec![];
    let mut complete = true;
    for claim in &pod.claims {
        if let Some(name) = &claim.resource_claim_name {
            names.push(name.clone());
        } else if claim.resource_claim_template_name.is_some() {
            match pod
                .claim_statuses
                .iter()
                .find(|s| s.name == claim.name)
                .and_then(|s| s.resource_claim_name.clone())
            {
                Some(name) => names.push(name),
                None => complete = false,
            }
        }
    }
    (names, complete)
}

pub fn plan(claims: &[StoredClaim], pods: &[Arc<LeanPod>], classes: &HashMap<String, Arc<DeviceClass>>) -> Work {
    let by_key: HashMap<(&str, &str), &StoredClaim> = claims.iter().map(|c| ((c.namespace(), c.name()), c)).collect();
    let mut work = Work::default();
    for pod in pods {
        let namespace = pod.namespace().unwrap_or_default();
        let (names, complete) = pod_claim_names(pod);
        let gated = pod.gates.iter().any(|g| g == SCHEDULING_GATE);
        if !gated && pod.unschedulable {
            let waiting = names
                .iter()
                .filter_map(|n| by_key.get(&(namespace.as_str(), n.as_str()))?.pending())
                .filter(|c| is_our_claim(c, classes));
            work.unschedulable.extend(waiting.map(|c| (pod.clone(), c.clone())));
        }
        if !pod.gate_is_last() || pod.metadata.deletion_timestamp.is_some() || !complete {
            continue;
        }
        let found: Vec<_> = names
            .iter()
            .filter_map(|n| by_key.get(&(namespace.as_str(), n.as_str())))
            .collect();
        if found.len() == names.len() && !found.is_empty() {
            let claims: Vec<_> = found.into_iter().filter_map(|c| c.pending()).cloned().collect();
            if claims.iter().any(|c| being_deleted(c)) {
                continue;
            }
            work.gated.push(GatedPod {
                pod: pod.clone(),
                claims,
            });
        }
    }
    work
}

/// A claim being deleted is allocated by nobody: the scheduler gives up on it ("got deleted in the
/// meantime", `bindClaim`), and the API server refuses a new finalizer on it.
fn being_deleted(claim: &ResourceClaim) -> bool {
    claim.metadata.deletion_timestamp.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn arc<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).unwrap())
    }

    fn claim(name: &str, class: &str) -> StoredClaim {
        StoredClaim::of(
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name},
                   "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}))
            .unwrap(),
        )
    }

    fn classes() -> HashMap<String, Arc<DeviceClass>> {
        let ours = arc(
            json!({"metadata": {"name": "a30"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.deckhouse.io\""}}]}}),
        );
        let theirs = arc(
            json!({"metadata": {"name": "nic"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == \"net.example.com\""}}]}}),
        );
        HashMap::from([("a30".to_owned(), ours), ("nic".to_owned(), theirs)])
    }

    #[test]
    fn only_claims_a_gated_pod_waits_for_are_allocated() {
        let uses = |pod: &str, claim: &str, gates: serde_json::Value| -> Arc<LeanPod> {
            arc(json!({"metadata": {"name": pod, "namespace": "ns"},
                "spec": {"containers": [], "schedulingGates": gates,
                         "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}))
        };
        let pods = [
            uses("ungated", "theirs", json!([])),
            uses("gated", "ours", json!([{"name": SCHEDULING_GATE}])),
        ];
        let claims = vec![
            claim("unused", "a30"),
            claim("missing-class", "nope"),
            claim("theirs", "a30"),
            claim("ours", "a30"),
        ];
        let work = plan(&claims, &pods, &classes());
        let gated: Vec<_> = work
            .gated
            .iter()
            .map(|g| {
                (
                    g.pod.name_any(),
                    g.claims.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(
            gated,
            [("gated".to_owned(), vec!["ours".to_owned()])],
            "a claim no Pod uses, or one an ungated Pod uses (the scheduler's), is not ours to allocate"
        );
    }

    #[test]
    fn gated_pods_wait_until_their_template_claims_exist() {
        let gated = |statuses: serde_json::Value| -> Arc<LeanPod> {
            arc(json!({"metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [], "schedulingGates": [{"name": SCHEDULING_GATE}],
                         "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                "status": {"resourceClaimStatuses": statuses}}))
        };
        let claims = vec![claim("p-gpu-x", "a30")];
        assert!(
            plan(&claims, &[gated(json!([]))], &classes()).gated.is_empty(),
            "claim not created yet"
        );
        let work = plan(
            &claims,
            &[gated(json!([{"name": "gpu", "resourceClaimName": "p-gpu-x"}]))],
            &classes(),
        );
        assert_eq!(work.gated.len(), 1);
        assert_eq!(work.gated[0].claims[0].name_any(), "p-gpu-x");
    }

    #[test]
    fn a_pod_is_ours_only_once_our_gate_is_its_last() {
        let held = |gates: serde_json::Value| -> Arc<LeanPod> {
            arc(json!({"metadata": {"name": "p", "namespace": "ns"},
                "spec": {"containers": [], "schedulingGates": gates,
                         "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}}))
        };
        let claims = vec![claim("c", "a30")];
        let queued = held(json!([{"name": "kueue.x-k8s.io/admission"}, {"name": SCHEDULING_GATE}]));
        assert!(
            plan(&claims, &[queued], &classes()).gated.is_empty(),
            "held by the queue: its GPUs would sit idle"
        );
        let admitted = held(json!([{"name": SCHEDULING_GATE}]));
        assert_eq!(plan(&claims, &[admitted], &classes()).gated.len(), 1);
    }

    #[test]
    fn claims_being_deleted_are_allocated_by_nobody() {
        let deleted = |name: &str| {
            let stored: ResourceClaim =
                serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "uid": name,
                    "deletionTimestamp": "2026-11-29T10:00:00Z", "finalizers": ["example.com/keep"]},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "a30"}}]}}}))
                .unwrap();
            StoredClaim::of(stored)
        };
        let gated: Arc<LeanPod> = arc(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "schedulingGates": [{"name": SCHEDULING_GATE}],
                     "resourceClaims": [{"name": "gpu", "resourceClaimName": "going"}]}}));
        let work = plan(&[deleted("going")], &[gated], &classes());
        assert!(work.gated.is_empty(), "a gated Pod whose claim is being deleted");
    }

    #[test]
    fn claims_of_unschedulable_pods_are_explained_not_allocated() {
        let pod = |name: &str, claim: &str, reason: &str| -> Arc<LeanPod> {
            arc(json!({"metadata": {"name": name, "namespace": "ns"},
                "spec": {"containers": [], "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
                "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": reason}]}}))
        };
        let claims = vec![claim("waits", "a30"), claim("gated", "a30"), claim("nic", "nic")];
        let pods = [
            pod("p1", "waits", "Unschedulable"),
            pod("p2", "nic", "Unschedulable"),
            pod("p3", "gated", "SchedulingGated"),
        ];
        let work = plan(&claims, &pods, &classes());
        let names: Vec<_> = work
            .unschedulable
            .iter()
            .map(|(p, c)| (p.name_any(), c.name_any()))
            .collect();
        assert_eq!(
            names,
            [("p1".to_owned(), "waits".to_owned())],
            "only our claims, only where the scheduler gave up"
        );
    }
}
