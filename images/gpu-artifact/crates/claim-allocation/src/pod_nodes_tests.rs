use k8s_openapi::api::core::v1::Node;
use serde_json::{Value, json};

use super::*;

fn node(name: &str, labels: Value, spec: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec})).unwrap()
}

fn pod(spec: Value) -> LeanPod {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "main"}]);
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})).unwrap()
}

fn gpu_node() -> Node {
    node("gpu-1", json!({"zone": "a", "gpus": "8"}), json!({}))
}

#[test]
fn node_name_and_selector_must_match() {
    assert!(pod_may_run_on(&pod(json!({})), &gpu_node()));
    assert!(pod_may_run_on(&pod(json!({"nodeName": "gpu-1"})), &gpu_node()));
    assert!(!pod_may_run_on(&pod(json!({"nodeName": "gpu-2"})), &gpu_node()));
    assert!(pod_may_run_on(
        &pod(json!({"nodeSelector": {"zone": "a"}})),
        &gpu_node()
    ));
    assert!(!pod_may_run_on(
        &pod(json!({"nodeSelector": {"zone": "b"}})),
        &gpu_node()
    ));
    assert!(!pod_may_run_on(
        &pod(json!({"nodeSelector": {"rack": "a"}})),
        &gpu_node()
    ));
}

fn affinity(terms: Value) -> Value {
    json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}})
}

#[test]
fn required_affinity_terms_are_ored_and_their_requirements_anded() {
    let runs = |terms: Value| pod_may_run_on(&pod(affinity(terms)), &gpu_node());
    assert!(runs(
        json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}])
    ));
    assert!(!runs(
        json!([{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["a"]}]}])
    ));
    assert!(runs(json!([
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}
    ])));
    assert!(!runs(json!([{"matchExpressions": [
        {"key": "zone", "operator": "Exists"},
        {"key": "gpus", "operator": "Gt", "values": ["8"]}
    ]}])));
    assert!(runs(json!([{"matchExpressions": [
        {"key": "rack", "operator": "DoesNotExist"},
        {"key": "gpus", "operator": "Lt", "values": ["9"]}
    ]}])));
    assert!(!runs(json!([{}])), "an empty term matches no node");
}

#[test]
fn taints_need_tolerations_and_a_cordoned_node_is_tainted() {
    let tainted = node(
        "gpu-1",
        json!({}),
        json!({"taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
                          {"key": "soft", "effect": "PreferNoSchedule"}]}),
    );
    assert!(!pod_may_run_on(&pod(json!({})), &tainted));
    let tolerating = |t: Value| pod_may_run_on(&pod(json!({"tolerations": [t]})), &tainted);
    assert!(tolerating(json!({"key": "dedicated", "value": "ml"})));
    assert!(tolerating(
        json!({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"})
    ));
    assert!(tolerating(json!({"operator": "Exists"})));
    assert!(!tolerating(json!({"key": "dedicated", "value": "web"})));
    assert!(!tolerating(
        json!({"key": "dedicated", "value": "ml", "effect": "NoExecute"})
    ));

    let cordoned = node("gpu-1", json!({}), json!({"unschedulable": true}));
    assert!(!pod_may_run_on(&pod(json!({})), &cordoned));
    let tolerates_cordon = json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]});
    assert!(pod_may_run_on(&pod(tolerates_cordon), &cordoned));
}

#[test]
fn a_lean_node_keeps_what_the_filter_reads() {
    let mut full: Node = serde_json::from_value(json!({
        "metadata": {"name": "gpu-1", "labels": {"zone": "a"}, "annotations": {"big": "x"}, "resourceVersion": "7"},
        "spec": {"podCIDR": "10.0.0.0/24", "unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        "status": {"images": [{"names": ["registry/image:1"], "sizeBytes": 1}],
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}}
    }))
    .unwrap();
    let before: Vec<bool> = [json!({}), json!({"nodeSelector": {"zone": "a"}})]
        .into_iter()
        .map(|p| pod_may_run_on(&pod(p), &full))
        .collect();
    lean_node(&mut full);
    assert_eq!(
        serde_json::to_value(&full.status).unwrap(),
        json!({"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}),
        "of the status only what node_fit reads"
    );
    assert!(full.metadata.annotations.is_none());
    assert_eq!(full.spec.as_ref().unwrap().pod_cidr, None);
    let after: Vec<bool> = [json!({}), json!({"nodeSelector": {"zone": "a"}})]
        .into_iter()
        .map(|p| pod_may_run_on(&pod(p), &full))
        .collect();
    assert_eq!(before, after);
}
