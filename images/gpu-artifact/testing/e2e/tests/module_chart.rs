//! The module's chart rendered by the real helm for each bootstrap and feature state: what renders
//! where, with which images, resources and scrape permissions. (module_chart_states.rs has every
//! state dry-run by the real API server.)

mod support;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use support::components::repo_root;
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

fn deployment<'a>(objects: &'a [Value], name: &str) -> Option<&'a Value> {
    of_kind(objects, "Deployment").find(|d| d["metadata"]["name"] == name)
}

#[test]
fn controllers_follow_high_availability() {
    let single = render_chart(&["driver-ready"]);
    let ha = render_chart(&["driver-ready", "high-availability"]);
    for name in ["gpu-controller", "gpu-dra-controller"] {
        let one = deployment(&single, name).unwrap_or_else(|| panic!("{name} renders"));
        assert_eq!(one["spec"]["replicas"], 1, "{name}");
        let container = &one["spec"]["template"]["spec"]["containers"][0];
        let leader_election = container["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "LEADER_ELECTION");
        assert_eq!(leader_election.unwrap()["value"], "false", "{name}");
        let two = deployment(&ha, name).unwrap();
        assert_eq!(two["spec"]["replicas"], 2, "{name}");
        let anti = &two["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchLabels"]["app"],
            name
        );
        let pdb = of_kind(&ha, "PodDisruptionBudget")
            .find(|p| p["metadata"]["name"] == name)
            .unwrap();
        assert_eq!(pdb["spec"]["minAvailable"], 1, "{name}");
        assert!(
            of_kind(&single, "Service").any(|s| s["metadata"]["name"] == format!("{name}-metrics")),
            "{name} metrics Service"
        );
        assert!(
            of_kind(&single, "ServiceMonitor").any(|s| s["metadata"]["name"] == name),
            "{name} ServiceMonitor"
        );
    }
}

#[test]
fn every_workload_has_a_vpa_short_history_and_pinned_images() {
    let objects = render_chart(&["driver-ready"]);
    let vpas: BTreeSet<String> = of_kind(&objects, "VerticalPodAutoscaler")
        .map(|v| v["spec"]["targetRef"]["name"].as_str().unwrap().to_owned())
        .collect();
    for workload in objects
        .iter()
        .filter(|o| o["kind"] == "DaemonSet" || o["kind"] == "Deployment")
    {
        let name = workload["metadata"]["name"].as_str().unwrap();
        assert!(vpas.contains(name), "{name} has a VPA");
        assert_eq!(workload["spec"]["revisionHistoryLimit"], 2, "{name}");
        let pod = &workload["spec"]["template"]["spec"];
        let containers = pod["containers"]
            .as_array()
            .unwrap()
            .iter()
            .chain(pod["initContainers"].as_array().into_iter().flatten());
        for container in containers {
            let image = container["image"].as_str().unwrap();
            assert!(image.contains("@sha256:"), "{name}/{}: {image}", container["name"]);
        }
    }
}

/// The module's own gates read the module names Deckhouse enables today: with only
/// `vertical-pod-autoscaler` and `operator-prometheus` on, every workload still gets its VPA (and so no
/// fixed cpu/memory requests) and Prometheus its PodMonitors and ServiceMonitors.
#[test]
fn vpas_and_monitors_follow_todays_module_names() {
    let objects = render_chart(&["driver-ready", "current-module-names-only"]);
    let vpas: BTreeSet<&str> = of_kind(&objects, "VerticalPodAutoscaler")
        .map(|v| v["spec"]["targetRef"]["name"].as_str().unwrap())
        .collect();
    for workload in objects
        .iter()
        .filter(|o| o["kind"] == "DaemonSet" || o["kind"] == "Deployment")
    {
        let name = workload["metadata"]["name"].as_str().unwrap();
        assert!(vpas.contains(name), "{name} has no VPA under vertical-pod-autoscaler");
        for container in workload["spec"]["template"]["spec"]["containers"].as_array().unwrap() {
            let requests = &container["resources"]["requests"];
            assert!(
                requests.get("cpu").is_none() && requests.get("memory").is_none(),
                "{name}/{}: fixed requests {requests} beside its VPA",
                container["name"]
            );
        }
    }
    let monitors: BTreeSet<&str> = objects
        .iter()
        .filter(|o| o["kind"] == "PodMonitor" || o["kind"] == "ServiceMonitor")
        .map(|m| m["metadata"]["name"].as_str().unwrap())
        .collect();
    for scraped in ["gpu-handler", "gpu-node-agent", "gpu-controller", "gpu-dra-controller"] {
        assert!(
            monitors.contains(scraped),
            "{scraped} is not scraped under operator-prometheus: {monitors:?}"
        );
    }
}

/// The module's own images (built from images/<dir>, the NVIDIA ones repackaged there too), by digest:
/// digest -> images/<dir>.
fn own_image_dirs() -> BTreeMap<String, String> {
    let global: Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("tools/test/module-fixtures/global.yaml")).unwrap(),
    )
    .unwrap();
    let digests = global["global"]["modulesImages"]["digests"]["gpu"].as_object().unwrap();
    digests
        .iter()
        .map(|(name, digest)| (digest.as_str().unwrap().to_owned(), kebab(name)))
        .collect()
}

fn kebab(camel: &str) -> String {
    camel.chars().fold(String::new(), |mut out, c| {
        if c.is_ascii_uppercase() {
            out.push('-');
        }
        out.push(c.to_ascii_lowercase());
        out
    })
}

/// Per image, what dmt's mount-points rules check for the module as a whole: every volumeMount of a
/// container running one of our (distroless) images is pre-created by that image's
/// images/<dir>/mount-points.yaml, and that file lists nothing no container of the image mounts (over
/// both driver-root layouts).
#[test]
fn own_images_pre_create_exactly_the_paths_they_mount() {
    let mut objects = render_chart(&["driver-ready"]);
    objects.extend(render_chart(&["driver-ready", "containerized-driver"]));
    let dirs = own_image_dirs();
    let mut mounted: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for workload in objects
        .iter()
        .filter(|o| o["kind"] == "DaemonSet" || o["kind"] == "Deployment")
    {
        let pod = &workload["spec"]["template"]["spec"];
        let containers = pod["containers"].as_array().unwrap().iter();
        for container in containers.chain(pod["initContainers"].as_array().into_iter().flatten()) {
            let image = container["image"].as_str().unwrap();
            let Some(dir) = dirs
                .iter()
                .find(|(digest, _)| image.ends_with(digest.as_str()))
                .map(|(_, d)| d)
            else {
                continue;
            };
            let paths = mounted.entry(dir.clone()).or_default();
            for mount in container["volumeMounts"].as_array().into_iter().flatten() {
                paths.insert(mount["mountPath"].as_str().unwrap().to_owned());
            }
        }
    }
    for dir in [
        "gpu-handler",
        "gpu-controller",
        "nvidia-dcgm",
        "nvidia-dcgm-exporter",
        "nvidia-validator",
    ] {
        assert!(mounted.contains_key(dir), "{dir} in {mounted:?}");
    }
    for (dir, paths) in &mounted {
        let file = repo_root().join(format!("images/{dir}/mount-points.yaml"));
        let listed: BTreeSet<String> = match std::fs::read_to_string(&file) {
            Ok(text) => {
                let doc: Value = serde_yaml::from_str(&text).unwrap();
                ["dirs", "files"]
                    .iter()
                    .flat_map(|key| doc[key].as_array().cloned().unwrap_or_default())
                    .map(|p| p.as_str().unwrap().to_owned())
                    .collect()
            }
            Err(_) => BTreeSet::new(),
        };
        assert_eq!(
            &listed, paths,
            "images/{dir}/mount-points.yaml against the rendered volumeMounts"
        );
    }
}

/// Every kube-rbac-proxy sidecar authorises scrapers by `get` on its workload's prometheus-metrics
/// subresource; Prometheus must be granted exactly those, or its scrapes get 403.
#[test]
fn prometheus_may_scrape_every_metrics_proxy() {
    let objects = render_chart(&["driver-ready"]);
    let mut proxied = BTreeSet::new();
    for workload in objects
        .iter()
        .filter(|o| o["kind"] == "DaemonSet" || o["kind"] == "Deployment")
    {
        for container in workload["spec"]["template"]["spec"]["containers"].as_array().unwrap() {
            let config = container["env"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["name"] == "KUBE_RBAC_PROXY_CONFIG");
            let Some(config) = config else { continue };
            let config: Value = serde_yaml::from_str(config["value"].as_str().unwrap()).unwrap();
            let target = &config["upstreams"][0]["authorization"]["resourceAttributes"];
            proxied.insert(format!(
                "{}/{}/{}",
                target["resource"].as_str().unwrap(),
                target["subresource"].as_str().unwrap(),
                target["name"].as_str().unwrap()
            ));
        }
    }
    let role = of_kind(&objects, "Role")
        .find(|r| r["metadata"]["name"] == "access-to-gpu-prometheus-metrics")
        .expect("the Role for Prometheus");
    let granted: BTreeSet<String> = role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rule| {
            let resource = rule["resources"][0].as_str().unwrap().to_owned();
            rule["resourceNames"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |n| format!("{resource}/{}", n.as_str().unwrap()))
        })
        .collect();
    assert!(proxied.len() >= 5, "{proxied:?}");
    assert_eq!(granted, proxied);
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

#[test]
fn controllers_fall_back_to_system_nodes_without_control_plane_nodes() {
    let selector = |states: &[&str]| {
        let objects = render_chart(states);
        deployment(&objects, "gpu-controller").unwrap()["spec"]["template"]["spec"]["nodeSelector"].clone()
    };
    assert_eq!(
        selector(&["driver-ready"]),
        json!({"node-role.kubernetes.io/control-plane": ""})
    );
    assert_eq!(
        selector(&["driver-ready", "managed-control-plane"]),
        json!({"node-role.deckhouse.io/system": ""})
    );
}

#[test]
fn dashboards_and_rules_come_from_lib_helm() {
    let objects = render_chart(&["driver-ready"]);
    let dashboards: Vec<&Value> = of_kind(&objects, "GrafanaDashboardDefinition").collect();
    assert_eq!(dashboards.len(), 3);
    for dashboard in dashboards {
        let labels = &dashboard["metadata"]["labels"];
        assert_eq!(labels["prometheus.deckhouse.io/grafana-dashboard"], "", "{labels}");
        assert_eq!(labels["module"], "gpu");
    }
    let rules: BTreeSet<&str> = of_kind(&objects, "PrometheusRule")
        .map(|r| r["metadata"]["name"].as_str().unwrap())
        .collect();
    assert!(
        rules.contains("gpu-configuration") && rules.contains("gpu-dra"),
        "{rules:?}"
    );
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
