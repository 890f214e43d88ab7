//! Probes as a kubelet resolves them, on every workload `helm` renders. A server-side dry-run
//! accepts a probe of a port no container serves; the kubelet then never sees the Pod Ready, the
//! rollout stalls and the PDB blocks drains. The rules checked here are the kubelet's:
//! - a named port is looked up in the probed container's own `ports`, never in its sidecars';
//! - a numeric port is probed on the Pod's address (shared by all its containers), so some container
//!   of the Pod must declare it, unless the Pod is on the host network and the probe names `host`;
//! - a port kube-rbac-proxy serves answers a probe (which carries no token) only on the paths its
//!   config excludes from authorization and routes to an upstream, or on its own `--livez-path`.

mod support;

use serde_json::Value;
use support::rendered_rbac::render_chart;

const WORKLOADS: [&str; 3] = ["Deployment", "DaemonSet", "StatefulSet"];
const PROBES: [&str; 3] = ["livenessProbe", "readinessProbe", "startupProbe"];

/// What is wrong with one probe of `container` in `pod` (a Pod spec), if anything.
fn probe_fault(pod: &Value, container: &Value, probe: &Value) -> Option<String> {
    let action = probe.get("httpGet").or_else(|| probe.get("tcpSocket"))?;
    let declares = |c: &Value, port: &Value| {
        c["ports"].as_array().into_iter().flatten().any(|p| match port {
            Value::String(name) => p["name"].as_str() == Some(name),
            number => &p["containerPort"] == number,
        })
    };
    let port = &action["port"];
    if port.is_string() {
        return (!declares(container, port)).then(|| format!("named port {port} is not declared by this container"));
    }
    let host_network = pod["hostNetwork"].as_bool().unwrap_or(false);
    if action.get("host").is_some() {
        return (!host_network).then(|| "`host` on a Pod of the Pod network probes the node, not the Pod".into());
    }
    let containers = pod["containers"].as_array().cloned().unwrap_or_default();
    let Some(server) = containers.iter().find(|c| declares(c, port)) else {
        return Some(format!("no container of the Pod declares port {port}"));
    };
    if server["name"] != "kube-rbac-proxy" {
        return None;
    }
    let path = action["path"].as_str().unwrap_or("/");
    let own_livez = format!("--livez-path={path}");
    if server["args"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| a.as_str() == Some(&own_livez))
    {
        return None;
    }
    let config = server["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "KUBE_RBAC_PROXY_CONFIG")
        .and_then(|e| e["value"].as_str())
        .and_then(|text| serde_yaml::from_str::<Value>(text).ok())
        .unwrap_or_default();
    let listed = |key: &str, field: &str| {
        config[key]
            .as_array()
            .into_iter()
            .flatten()
            .any(|entry| entry.get(field).unwrap_or(entry).as_str() == Some(path))
    };
    if !listed("excludePaths", "") {
        return Some(format!("kube-rbac-proxy answers {path} only with a token; exclude it"));
    }
    (!listed("upstreams", "path")).then(|| format!("kube-rbac-proxy has no upstream for {path}"))
}

/// Every fault of every probe in `objects`, as "<kind>/<name> <container> <probe>: <fault>".
fn probe_faults(objects: &[Value]) -> Vec<String> {
    let mut faults = Vec::new();
    for object in objects.iter().filter(|o| WORKLOADS.iter().any(|k| o["kind"] == *k)) {
        let pod = &object["spec"]["template"]["spec"];
        for container in pod["containers"].as_array().into_iter().flatten() {
            for kind in PROBES {
                if let Some(fault) = container.get(kind).and_then(|p| probe_fault(pod, container, p)) {
                    faults.push(format!(
                        "{}/{} {} {kind}: {fault}",
                        object["kind"].as_str().unwrap_or_default(),
                        object["metadata"]["name"].as_str().unwrap_or_default(),
                        container["name"].as_str().unwrap_or_default(),
                    ));
                }
            }
        }
    }
    faults
}

#[test]
fn every_probe_reaches_a_port_its_pod_serves() {
    for states in [&["driver-ready"][..], &["driver-ready", "high-availability"]] {
        let objects = render_chart(states);
        let probed = objects
            .iter()
            .filter(|o| WORKLOADS.iter().any(|k| o["kind"] == *k))
            .flat_map(|o| {
                o["spec"]["template"]["spec"]["containers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter(|c| PROBES.iter().any(|p| c.get(*p).is_some()))
            .count();
        assert!(
            probed >= 5,
            "{states:?}: the chart probes its components ({probed} containers)"
        );
        assert_eq!(probe_faults(&objects), Vec::<String>::new(), "{states:?}");
    }
}

#[test]
fn the_kubelets_rules_catch_a_sidecars_named_port() {
    // The defect this test exists for: gpu-handler probed `https-metrics`, a port only its
    // kube-rbac-proxy sidecar names.
    let mut objects = render_chart(&["driver-ready"]);
    let handler = objects
        .iter_mut()
        .find(|o| o["kind"] == "DaemonSet" && o["metadata"]["name"] == "gpu-handler")
        .expect("the chart renders gpu-handler");
    let container = &mut handler["spec"]["template"]["spec"]["containers"][0];
    container["readinessProbe"]["httpGet"]["port"] = "https-metrics".into();
    let faults = probe_faults(&objects);
    assert_eq!(faults.len(), 1, "{faults:?}");
    assert!(
        faults[0].contains("gpu-handler") && faults[0].contains("not declared"),
        "{faults:?}"
    );
}
