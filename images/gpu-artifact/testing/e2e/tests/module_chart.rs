//! The module's chart rendered by the real helm for each bootstrap and feature state: where its node
//! components run, what they load and are told. (module_chart_workloads.rs has the Deployments, VPAs,
//! monitors and images; module_chart_states.rs every state dry-run by the real API server.)

mod support;

use serde_json::{Value, json};
use support::module_hooks::run_hook;
use support::rendered_rbac::{of_kind, render_chart, render_chart_with};

fn daemonset<'a>(objects: &'a [Value], name: &str) -> &'a Value {
    of_kind(objects, "DaemonSet")
        .find(|d| d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no DaemonSet {name}"))
}

/// The `In ["true"]` node labels a DaemonSet's Pods require.
fn required_labels(objects: &[Value], name: &str) -> Vec<String> {
    let terms = &daemonset(objects, name)["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(terms.as_array().unwrap().len(), 1, "{name}: one term");
    terms[0]["matchExpressions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["operator"] == "In" && e["values"] == json!(["true"]))
        .map(|e| e["key"].as_str().unwrap().to_owned())
        .collect()
}

fn env(objects: &[Value], name: &str, container: &str, var: &str) -> String {
    let containers = daemonset(objects, name)["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .clone();
    let container = containers.iter().find(|c| c["name"] == container).unwrap();
    let entry = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == var)
        .unwrap();
    entry["value"].as_str().unwrap().to_owned()
}

/// Node components wait for their node's bootstrap through node labels alone: the validator for an
/// NVIDIA card (gpu-detect-node.sh's label), the rest for a proven driver (bootstrap-nodes' label), and
/// no Pod template names a node or carries a hash of nodes.
#[test]
fn node_components_follow_the_bootstrap_labels() {
    let objects = render_chart(&["driver-ready"]);
    assert_eq!(
        required_labels(&objects, "gpu-driver-validator"),
        ["gpu.deckhouse.io/nvidia-gpu"]
    );
    assert_eq!(
        required_labels(&objects, "gpu-handler"),
        ["gpu.deckhouse.io/driver-ready", "gpu.deckhouse.io/cdi"]
    );
    for name in ["gpu-dcgm", "gpu-dcgm-exporter"] {
        assert_eq!(
            required_labels(&objects, name),
            ["gpu.deckhouse.io/driver-ready"],
            "{name}"
        );
    }
    for daemonset in of_kind(&objects, "DaemonSet") {
        let template = daemonset["spec"]["template"].to_string();
        assert!(
            !template.contains("kubernetes.io/hostname") && !template.contains("hash"),
            "{}: {template}",
            daemonset["metadata"]["name"]
        );
    }
}

/// The chart as the real helm renders it with the values the real bootstrap-nodes hook leaves for
/// PhysicalGPUs `gpus` and Nodes `nodes` (its snapshots, as addon-operator gives them: worker-a and
/// worker-b with the bootstrap labels each carries), and the object operations the hook wrote.
/// The bootstrap hook talks to no API server.
fn rendered_after_bootstrap(gpus: Value, nodes: Value) -> (Vec<Value>, Vec<Value>) {
    let contexts = json!([{"binding": "beforeHelm", "snapshots": {"physicalgpus": gpus, "nodes": nodes}}]);
    let mut values = json!({"gpu": {"internal": {}}});
    let run = run_hook(
        "bootstrap-nodes",
        std::path::Path::new("/nonexistent"),
        &contexts,
        &values,
    );
    let patch: json_patch::Patch = serde_json::from_value(run.values_patch).unwrap();
    json_patch::patch(&mut values, &patch).unwrap();
    (
        render_chart_with(&["driver-ready"], Some(&values)),
        run.kubernetes_patch,
    )
}

#[test]
fn one_node_becoming_driver_ready_changes_no_pod_template() {
    let gpu = |node: &str, ready: &str| json!({"filterResult": {"node": node, "vendor": "10de", "driverReady": ready}});
    let node = |name: &str, driver_ready: &str| {
        json!({"filterResult": {
            "name": name, "cdi": "true", "nodeManagerGPU": false,
            "nvidiaGpus": "true", "driverReady": driver_ready,
        }})
    };
    // worker-b's GPUs are DriverReady and its Node says so; then worker-a's become DriverReady too.
    let nodes = json!([node("worker-a", ""), node("worker-b", "true")]);
    let (before, _) = rendered_after_bootstrap(
        json!([gpu("worker-a", "Unknown"), gpu("worker-b", "True")]),
        nodes.clone(),
    );
    let (after, operations) =
        rendered_after_bootstrap(json!([gpu("worker-a", "True"), gpu("worker-b", "True")]), nodes);
    let gated = ["gpu-driver-validator", "gpu-handler", "gpu-dcgm", "gpu-dcgm-exporter"];
    for name in gated {
        assert_eq!(
            daemonset(&before, name)["spec"]["template"],
            daemonset(&after, name)["spec"]["template"],
            "{name}: a change of its Pod template would restart it on every node"
        );
    }
    // The change lands on worker-a alone, as the label its DaemonSets select on.
    let labelled: Vec<&Value> = operations.iter().filter(|op| op["kind"] == "Node").collect();
    assert_eq!(labelled.len(), 1, "{operations:#?}");
    assert_eq!(labelled[0]["name"], "worker-a");
    assert_eq!(
        labelled[0]["mergePatch"]["metadata"]["labels"]["gpu.deckhouse.io/driver-ready"],
        "true"
    );
}

#[test]
fn dra_parts_follow_the_discovered_api_server() {
    for version in [&["driver-ready"][..], &["driver-ready", "kubernetes-newest"][..]] {
        let objects = render_chart(version);
        // dcgm-exporter's DRA mode maps only the driver gpu.nvidia.com: off, and no API access for it.
        assert_eq!(
            env(&objects, "gpu-dcgm-exporter", "dcgm-exporter", "KUBERNETES_ENABLE_DRA"),
            "false"
        );
        assert_eq!(env(&objects, "gpu-handler", "gpu-handler", "MIG_OFFERS"), "true");
        assert!(!of_kind(&objects, "ClusterRole").any(|r| r["metadata"]["name"] == "d8:gpu:gpu-dcgm-exporter"));
    }
    let gates_off = render_chart(&["driver-ready", "dra-gates-off"]);
    assert_eq!(env(&gates_off, "gpu-handler", "gpu-handler", "MIG_OFFERS"), "false");
}

fn node_expressions<'a>(objects: &'a [Value], name: &str) -> &'a [Value] {
    daemonset(objects, name)["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"][0]["matchExpressions"]
        .as_array()
        .unwrap()
}

const NODE_COMPONENTS: [&str; 5] = [
    "gpu-node-agent",
    "gpu-driver-validator",
    "gpu-handler",
    "gpu-dcgm",
    "gpu-dcgm-exporter",
];

#[test]
fn node_components_stay_off_the_handler_off_nodes_without_cdi_and_the_agent_off_nodes_without_gpus() {
    let objects = render_chart(&["driver-ready"]);
    let cdi = json!({"key": "gpu.deckhouse.io/cdi", "operator": "In", "values": ["true"]});
    let nvidia_gpu = json!({"key": "gpu.deckhouse.io/nvidia-gpu", "operator": "In", "values": ["true"]});
    for name in NODE_COMPONENTS {
        let expressions = node_expressions(&objects, name);
        assert_eq!(
            expressions.contains(&cdi),
            name == "gpu-handler",
            "{name}: {expressions:?}"
        );
        // The agent and the driver validator go where gpu-detect-node.sh found an NVIDIA card; the rest
        // follow bootstrap-nodes' driver-ready label (node_components_follow_the_bootstrap_labels).
        assert_eq!(
            expressions.contains(&nvidia_gpu),
            matches!(name, "gpu-node-agent" | "gpu-driver-validator"),
            "{name}: {expressions:?}"
        );
        // lib-helm's any-node tolerations: tainted GPU NodeGroups (dedicated.deckhouse.io) are not skipped.
        let tolerations = daemonset(&objects, name)["spec"]["template"]["spec"]["tolerations"]
            .as_array()
            .unwrap();
        assert!(
            tolerations.contains(&json!({"key": "dedicated.deckhouse.io", "operator": "Exists"})),
            "{name}: {tolerations:?}"
        );
    }
    let configurations: Vec<&str> = of_kind(&objects, "NodeGroupConfiguration")
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        configurations,
        [
            "gpu-containerd-cdi.sh",
            "gpu-detect-node.sh",
            "gpu-nvidia-runtime-envvar.sh"
        ]
    );
}

/// Which nodes node-manager's NVIDIA stack keeps is decided from NodeGroups (the hook node-groups):
/// every node component stays off the nodes of the NodeGroups with spec.gpu, by their group label, and
/// no node is kept off by the label node.deckhouse.io/gpu, which node-manager leaves on nodes for ever.
#[test]
fn node_components_stay_off_the_node_groups_node_manager_serves_and_nothing_else() {
    let plain = render_chart(&["driver-ready"]);
    let with_groups = render_chart(&["driver-ready", "node-manager-gpu-node-groups"]);
    let groups = json!({"key": "node.deckhouse.io/group", "operator": "NotIn", "values": ["gpu-a100", "gpu-mig"]});
    for name in NODE_COMPONENTS {
        for objects in [&plain, &with_groups] {
            let keys: Vec<&str> = node_expressions(objects, name)
                .iter()
                .map(|e| e["key"].as_str().unwrap())
                .collect();
            assert!(!keys.contains(&"node.deckhouse.io/gpu"), "{name}: {keys:?}");
        }
        assert!(
            !node_expressions(&plain, name)
                .iter()
                .any(|e| e["key"] == "node.deckhouse.io/group"),
            "{name}"
        );
        assert!(
            node_expressions(&with_groups, name).contains(&groups),
            "{name}: {:?}",
            node_expressions(&with_groups, name)
        );
    }
}

/// gpu-handler maps one glibc, the image's: NVML opened by its path in the driver root, no search path
/// naming a host directory (the host's libc.so.6 there would load under the image's loader), and the
/// driver's tools run through driver-tool, in a chroot into the driver root. DCGM's search path names
/// the image's own directory before the driver root's.
#[test]
fn node_components_load_no_library_of_the_host_but_the_drivers() {
    let objects = render_chart(&["driver-ready"]);
    let handler = daemonset(&objects, "gpu-handler")["spec"]["template"]["spec"]["containers"][0].clone();
    let names: Vec<&str> = handler["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&"LD_LIBRARY_PATH"), "gpu-handler: {names:?}");
    let nvml = env(&objects, "gpu-handler", "gpu-handler", "NVML_LIBRARY");
    assert!(
        nvml.split(':')
            .all(|c| c.starts_with("/driver-root/") && c.ends_with("/libnvidia-ml.so.1")),
        "{nvml}"
    );
    assert_eq!(
        env(&objects, "gpu-handler", "gpu-handler", "NVIDIA_SMI"),
        "/app/driver-tools/nvidia-smi"
    );
    assert_eq!(
        env(&objects, "gpu-handler", "gpu-handler", "NVIDIA_MPS_CONTROL"),
        "/app/driver-tools/nvidia-cuda-mps-control"
    );
    let dcgm = env(&objects, "gpu-dcgm", "dcgm", "LD_LIBRARY_PATH");
    let first_host = dcgm.split(':').position(|d| d.starts_with("/driver-root")).unwrap();
    assert_eq!(first_host, 1, "the image's directory alone comes first: {dcgm}");
}

#[test]
fn the_handler_gets_the_health_policy_of_the_module_config() {
    let objects = render_chart(&["driver-ready"]);
    let handler = |var| env(&objects, "gpu-handler", "gpu-handler", var);
    assert_eq!(handler("XID_APPLICATION"), "13,31,43,45,68,109");
    assert_eq!(handler("XID_IGNORED"), "");
    assert_eq!(handler("XID_CRITICAL"), "");
    assert_eq!(handler("XID_RECOVERABLE"), "8,32,69,94");
    assert_eq!(handler("HEALTH_QUIET_PERIOD"), "10m");
    assert_eq!(handler("HEALTH_NO_EXECUTE"), "false");
}
