//! What gpu-dra-controller keeps of each Pod of the cluster: the controller watches every Pod (the
//! bound ones take room on their nodes) and reads a few fields of each, so a Pod is kept as a
//! `LeanPod`, decoded from the API's Pod and never stored whole. A `Pod` is 2,248 bytes before any
//! string is counted: the Pod of the `controller_memory` bench kept 3,172 bytes gated and 3,059
//! bound as a `Pod` cut to the fields read, and keeps 1,302 and 758 as a `LeanPod` (a global
//! allocator counting 10,000 of each, with the fields the API server adds).
//!
//! Its requests are computed once, as the kube-scheduler's `PodRequests` computes them
//! (`node_fit::pod_requests`), not at every round. Where a Pod may go (selector, required node
//! affinity, tolerations) is kept only while it is not bound: only such Pods are matched to nodes
//! (`pod_nodes`), and the API server refuses a node name beside a scheduling gate ("cannot be set
//! until all schedulingGates have been cleared").

use std::borrow::Cow;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, Pod, PodResourceClaim, PodResourceClaimStatus, PodSpec, PodStatus, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::core::{NamespaceResourceScope, ObjectMeta};
use serde::Deserialize;

use crate::lean_objects::exact;
use crate::node_fit::{Requests, pod_requests};

/// The fields of a Pod the controller reads; decoded from a Pod's JSON (`serde(from = "Pod")`),
/// so the watch yields it directly.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(from = "Pod")]
pub struct LeanPod {
    /// Name, namespace, uid, resourceVersion and deletion time.
    pub metadata: ObjectMeta,
    /// CPU and memory it requests in all (containers, init containers, overhead, pod-level).
    pub requests: Requests,
    /// `spec.resourceClaims`.
    pub claims: Vec<PodResourceClaim>,
    /// The names of its scheduling gates, in order.
    pub gates: Vec<String>,
    pub node_name: Option<String>,
    /// Where it may go; `None` once bound.
    pub placement: Option<Box<Placement>>,
    /// `spec.priority` (0 without a PriorityClass).
    pub priority: i32,
    /// False with `preemptionPolicy: Never`.
    pub may_preempt: bool,
    /// `status.resourceClaimStatuses`: the names of claims made from its templates.
    pub claim_statuses: Vec<PodResourceClaimStatus>,
    /// Succeeded or Failed.
    pub terminated: bool,
    /// The scheduler gave up on it for now (PodScheduled False, Unschedulable).
    pub unschedulable: bool,
    pub start_time: Option<Time>,
    /// `status.nominatedNodeName`: a preemptor's hold.
    pub nominated_node_name: Option<String>,
}

/// A Pod's node constraints that the controller honours.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
    pub required_node_affinity: Option<NodeSelector>,
    pub tolerations: Vec<Toleration>,
}

impl From<Pod> for LeanPod {
    fn from(pod: Pod) -> Self {
        let metadata = ObjectMeta {
            name: pod.metadata.name,
            namespace: pod.metadata.namespace,
            uid: pod.metadata.uid,
            resource_version: pod.metadata.resource_version,
            deletion_timestamp: pod.metadata.deletion_timestamp,
            ..ObjectMeta::default()
        };
        let spec = pod.spec.unwrap_or_default();
        let status = pod.status.unwrap_or_default();
        let unschedulable =
            status.conditions.iter().flatten().any(|c| {
                c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
            });
        let terminated = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
        LeanPod {
            metadata,
            requests: pod_requests(&spec),
            claims: exact(spec.resource_claims.clone().unwrap_or_default()),
            gates: exact(spec.scheduling_gates.iter().flatten().map(|g| g.name.clone()).collect()),
            node_name: spec.node_name.clone(),
            placement: spec.node_name.is_none().then(|| Box::new(placement(&spec))),
            priority: spec.priority.unwrap_or(0),
            may_preempt: spec.preemption_policy.as_deref() != Some("Never"),
            terminated,
            unschedulable,
            ..lean_status(status)
        }
    }
}

fn placement(spec: &PodSpec) -> Placement {
    Placement {
        node_selector: spec.node_selector.clone().unwrap_or_default(),
        required_node_affinity: spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.clone()),
        tolerations: exact(spec.tolerations.clone().unwrap_or_default()),
    }
}

fn lean_status(status: PodStatus) -> LeanPod {
    LeanPod {
        claim_statuses: exact(status.resource_claim_statuses.unwrap_or_default()),
        start_time: status.start_time,
        nominated_node_name: status.nominated_node_name,
        ..LeanPod::default()
    }
}

impl LeanPod {
    /// True when it has our scheduling gate and no other.
    pub fn gate_is_last(&self) -> bool {
        crate::selection::only_our_gates(self.gates.iter().map(String::as_str))
    }
}

/// The API's Pods (`v1`, `pods`): the watch lists and watches them as `LeanPod`s.
impl kube::Resource for LeanPod {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("Pod")
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("")
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("pods")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
#[path = "lean_pod_tests.rs"]
mod tests;
