use serde_json::{Value, json};

use super::*;

fn spec(spec: Value) -> PodSpec {
    serde_json::from_value(spec).unwrap()
}

fn container(name: &str, cpu: &str, memory: &str) -> Value {
    json!({"name": name, "resources": {"requests": {"cpu": cpu, "memory": memory}}})
}

fn requests(milli_cpu: i128, memory: i128) -> Requests {
    Requests { milli_cpu, memory }
}

#[test]
fn pod_requests_follow_the_sidecar_formula_of_pod_requests() {
    // helpers.go's example: containers 1 CPU + sidecar 1 CPU; init containers 2 CPU after the
    // sidecar (2 + 1 = 3 while it runs) and 1 CPU before it: the Pod requests max(2, 3) = 3.
    let pod = spec(json!({
        "initContainers": [
            container("init-1", "1", "1G"),
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1", "memory": "1G"}}},
            container("init-2", "2", "1G")],
        "containers": [container("app", "1", "1G")]}));
    assert_eq!(pod_requests(&pod), requests(3000, 2_000_000_000));
}

#[test]
fn pod_level_requests_replace_the_containers_and_overhead_is_added() {
    let pod = spec(json!({
        "containers": [container("a", "100m", "64Mi"), container("b", "200m", "64Mi")],
        "resources": {"requests": {"cpu": "1"}},
        "overhead": {"cpu": "250m", "memory": "120Mi"}}));
    assert_eq!(
        pod_requests(&pod),
        requests(1250, (128 + 120) << 20),
        "pod-level CPU, the containers' memory, plus overhead"
    );
    // Go's MilliValue rounds up: 0.1m is 1m.
    assert_eq!(
        pod_requests(&spec(json!({"containers": [container("a", "100u", "1")]}))),
        requests(1, 1)
    );
}

#[test]
fn a_lean_pod_keeps_the_requests_of_its_spec() {
    let full = json!({
        "initContainers": [container("init", "3", "1Gi")],
        "containers": [container("a", "1500m", "2Gi")],
        "overhead": {"memory": "100Mi"}});
    let lean: LeanPod = serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": full})).unwrap();
    assert_eq!(lean.requests, pod_requests(&spec(full)));
    assert_eq!(
        lean.requests,
        requests(3000, 2 * 1024 * 1024 * 1024 + 100 * 1024 * 1024)
    );
}

fn node(allocatable: Value) -> Node {
    serde_json::from_value(json!({"metadata": {"name": "n"}, "status": {"allocatable": allocatable}})).unwrap()
}

fn bound(node: &str, cpu: &str, phase: &str) -> Arc<LeanPod> {
    Arc::new(
        serde_json::from_value(json!({"metadata": {"name": "p"},
            "spec": {"nodeName": node, "containers": [container("c", cpu, "1Gi")]},
            "status": {"phase": phase}}))
        .unwrap(),
    )
}

#[test]
fn bound_pods_that_have_not_ended_take_room() {
    let pods = [
        bound("n", "3", "Running"),
        bound("n", "1", "Pending"),
        bound("n", "8", "Succeeded"),
        bound("n", "8", "Failed"),
        bound("m", "2", "Running"),
    ];
    let taken = taken_by_bound_pods(&pods);
    assert_eq!(
        taken["n"],
        Taken {
            requests: requests(4000, 2 << 30),
            pods: 2
        }
    );
    assert_eq!(taken["m"].pods, 1);
}

#[test]
fn cpu_memory_and_pod_count_must_fit_what_is_left() {
    let eight = node(json!({"cpu": "8", "memory": "16Gi", "pods": "3"}));
    let taken = Taken {
        requests: requests(7000, 8 << 30),
        pods: 2,
    };
    assert!(fits(requests(1000, 8 << 30), &eight, taken), "exactly what is left");
    assert!(!fits(requests(1001, 0), &eight, taken), "one millicore too many");
    assert!(!fits(requests(0, (8 << 30) + 1), &eight, taken), "one byte too many");
    let full = Taken { pods: 3, ..taken };
    assert!(
        !fits(Requests::default(), &eight, full),
        "Too many pods, even for a Pod requesting nothing"
    );
    assert!(
        fits(Requests::default(), &eight, taken),
        "a Pod requesting nothing needs only a Pod's place"
    );
    let no_cpu = node(json!({"memory": "16Gi", "pods": "3"}));
    assert!(
        !fits(requests(1, 0), &no_cpu, Taken::default()),
        "an allocatable without CPU is 0 CPU"
    );
    let unreported: Node = serde_json::from_value(json!({"metadata": {"name": "n"}})).unwrap();
    assert!(
        fits(requests(1000, 1), &unreported, Taken::default()),
        "not judged without a status"
    );
}
