use k8s_openapi::api::core::v1::NodeSelectorTerm;
use serde_json::json;

use super::*;
use crate::selection::SCHEDULING_GATE;

fn lean(pod: serde_json::Value) -> LeanPod {
    serde_json::from_value(pod).unwrap()
}

#[test]
fn a_gated_pod_keeps_what_selection_placement_and_preemption_read() {
    let pod = lean(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "5",
            "labels": {"app": "x"}, "managedFields": [{"manager": "kubectl"}]},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"}}}],
            "overhead": {"cpu": "250m"}, "priority": 1000, "preemptionPolicy": "Never",
            "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
            "affinity": {"podAffinity": {}, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}]}}},
            "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}, {"name": SCHEDULING_GATE}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
        "status": {"phase": "Pending", "startTime": "2026-11-29T10:00:00Z", "nominatedNodeName": "n2",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"},
                           {"type": "Ready", "status": "False"}],
            "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-1"}]}}));
    let metadata = &pod.metadata;
    assert_eq!(
        (
            metadata.name.as_deref(),
            metadata.namespace.as_deref(),
            metadata.uid.as_deref()
        ),
        (Some("p"), Some("ns"), Some("u"))
    );
    assert_eq!(metadata.resource_version.as_deref(), Some("5"));
    assert_eq!((&metadata.labels, &metadata.managed_fields), (&None, &None));
    assert_eq!(
        (pod.requests.milli_cpu, pod.requests.memory),
        (750, 1 << 30),
        "containers and overhead, as the scheduler counts them"
    );
    assert_eq!(pod.gates, ["kueue.x-k8s.io/admission", SCHEDULING_GATE]);
    assert!(!pod.gate_is_last(), "the queue's gate comes first");
    assert_eq!(pod.claims[0].resource_claim_template_name.as_deref(), Some("t"));
    assert_eq!(pod.claim_statuses[0].resource_claim_name.as_deref(), Some("p-gpu-1"));
    assert_eq!(pod.node_name, None);
    let placement = pod.placement.as_deref().expect("a Pod not bound keeps where it may go");
    assert_eq!(
        placement.node_selector,
        BTreeMap::from([("zone".to_owned(), "a".to_owned())])
    );
    assert_eq!(placement.tolerations.len(), 1);
    let terms: &[NodeSelectorTerm] = &placement.required_node_affinity.as_ref().unwrap().node_selector_terms;
    assert_eq!(terms.len(), 1);
    assert_eq!((pod.priority, pod.may_preempt), (1000, false));
    assert_eq!(pod.nominated_node_name.as_deref(), Some("n2"));
    assert!(pod.start_time.is_some());
    assert!(!pod.terminated && !pod.unschedulable, "gated, not given up on");
}

#[test]
fn a_bound_pod_keeps_no_node_constraints() {
    let pod = lean(json!({
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            "nodeName": "n1", "nodeSelector": {"zone": "a"}, "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c1"}]},
        "status": {"phase": "Succeeded", "conditions": [{"type": "PodScheduled", "status": "True"}]}}));
    assert_eq!(pod.node_name.as_deref(), Some("n1"));
    assert_eq!(pod.placement, None);
    assert_eq!(pod.requests.milli_cpu, 1000);
    assert_eq!(
        (pod.priority, pod.may_preempt),
        (0, true),
        "the defaults of a Pod without a class"
    );
    assert!(pod.terminated);
    assert_eq!(pod.claims.len(), 1);
}

#[test]
fn the_scheduler_giving_up_is_kept_and_only_our_gate_alone_is_last() {
    let pod = lean(json!({"metadata": {"name": "p"},
        "spec": {"containers": [], "schedulingGates": [{"name": SCHEDULING_GATE}]},
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}));
    assert!(pod.unschedulable);
    assert!(pod.gate_is_last());
    let ungated = lean(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
    assert!(!ungated.gate_is_last(), "no gate at all");
}

#[test]
fn lists_keep_no_spare_room() {
    let pod = lean(json!({"metadata": {"name": "p"},
        "spec": {"containers": [], "schedulingGates": [{"name": SCHEDULING_GATE}],
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c"}]}}));
    let placement = pod.placement.as_deref().unwrap();
    assert_eq!(
        [
            pod.gates.capacity(),
            pod.claims.capacity(),
            pod.claim_statuses.capacity(),
            placement.tolerations.capacity()
        ],
        [1, 1, 1, 1]
    );
}
