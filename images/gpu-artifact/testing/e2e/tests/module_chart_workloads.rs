//! The module's chart rendered by the real helm: its Deployments and their high availability, the
//! VPAs, monitors, dashboards and rules, scrape permissions, and the paths each own image pre-creates.
//! (module_chart.rs has the node components; module_chart_states.rs every state dry-run by the real API
//! server.)

mod support;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use support::components::repo_root;
use support::rendered_rbac::{of_kind, render_chart};

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
