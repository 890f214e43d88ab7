//! The hooks binary as addon-operator runs it: `hook list` with an empty environment, `hook config`,
//! and `hook run` from binding-context fixture files, compared with the values patch or the object
//! operations it writes.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const BINARY: &str = env!("CARGO_BIN_EXE_gpu-module-hooks");
const FEATURE_GATES: &str = "0";
const BOOTSTRAP_NODES: &str = "2";
const TLS_CERTIFICATES: &str = "1";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs `hook run <index>` with `contexts` and `values`; returns the values patch it wrote.
fn run_hook(index: &str, contexts: &Value, values: &Value) -> Value {
    run_hook_against(index, contexts, values, None).values_patch
}

/// Runs `hook run <index>`; returns the values patch and the metric operations it wrote.
fn run_hook_with_metrics(index: &str, contexts: &Value, values: &Value) -> (Value, Vec<Value>) {
    let written = run_hook_against(index, contexts, values, None);
    (written.values_patch, written.metrics)
}

/// What one `hook run` wrote: its values patch, its object operations and its metric operations.
struct Written {
    values_patch: Value,
    objects: Vec<Value>,
    metrics: Vec<Value>,
}

/// Runs `hook run <index>` with the API server of `kubeconfig` (none: no kubeconfig at all).
fn run_hook_against(index: &str, contexts: &Value, values: &Value, kubeconfig: Option<&Path>) -> Written {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    std::fs::write(path("context.json"), contexts.to_string()).unwrap();
    std::fs::write(path("values.json"), values.to_string()).unwrap();
    std::fs::write(path("values-patch.json"), "").unwrap();
    std::fs::write(path("kubernetes-patch.json"), "").unwrap();
    std::fs::write(path("metrics.json"), "").unwrap();
    let mut command = Command::new(BINARY);
    command.args(["hook", "run", index]).env_clear();
    if let Some(kubeconfig) = kubeconfig {
        command.env("KUBECONFIG", kubeconfig);
    }
    let out = command
        .env("BINDING_CONTEXT_PATH", path("context.json"))
        .env("VALUES_PATH", path("values.json"))
        .env("VALUES_JSON_PATCH_PATH", path("values-patch.json"))
        .env("KUBERNETES_PATCH_PATH", path("kubernetes-patch.json"))
        .env("METRICS_PATH", path("metrics.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hook {index} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stream = |name: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(path(name)).unwrap();
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    Written {
        values_patch: serde_json::from_str(&std::fs::read_to_string(path("values-patch.json")).unwrap()).unwrap(),
        objects: stream("kubernetes-patch.json"),
        metrics: stream("metrics.json"),
    }
}

/// The series the hooks export are the ones monitoring/prometheus-rules alert on.
#[test]
fn the_alerts_query_the_series_the_hooks_export() {
    let contexts = json!([{"binding": "nodes", "type": "Group", "snapshots": {
        "physicalgpus": [{"filterResult": {"node": "no-cdi", "vendor": "10de", "driverReady": "True"}}],
        "nodes": [{"filterResult": {"name": "no-cdi", "cdi": ""}}]}}]);
    let (_, metrics) = run_hook_with_metrics(BOOTSTRAP_NODES, &contexts, &json!({}));
    let rules = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../../monitoring/prometheus-rules/configuration.yaml"),
    )
    .unwrap();
    let named: Vec<&str> = metrics.iter().filter_map(|m| m["name"].as_str()).collect();
    assert_eq!(named, ["d8_gpu_node_not_served"], "{metrics:?}");
    for name in named
        .iter()
        .chain(["d8_gpu_feature_gate_enabled", "d8_gpu_feature_gates_unknown"].iter())
    {
        assert!(rules.contains(&format!("({name}")), "no alert on {name}");
    }
}

/// An API server whose /metrics cannot be read (here: nothing listens where the kubeconfig points)
/// leaves the feature gates the module last found in its values, and says so by a metric the alert
/// D8GpuFeatureGatesUnknown watches, instead of failing the module's run.
#[test]
fn feature_gates_stay_as_last_found_when_the_api_server_metrics_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    // Port 1 on loopback: refused at once, nothing leaves the machine.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\", insecure-skip-tls-verify: true}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n",
    )
    .unwrap();
    let last = json!({"featureGates": ["DRAPartitionableDevices"], "missingFeatureGates": ["DRAExtendedResource"]});
    let values = json!({"global": {"discovery": {"kubernetesVersion": "1.34.4"}},
                        "gpu": {"internal": {"kubernetes": last}}});
    let Written {
        values_patch: patch,
        metrics,
        ..
    } = run_hook_against(FEATURE_GATES, &json!([]), &values, Some(&kubeconfig));
    assert_eq!(patch, json!([]), "the values the module last found stay");
    let unknown: Vec<&Value> = metrics
        .iter()
        .filter(|m| m["name"] == "d8_gpu_feature_gates_unknown")
        .collect();
    assert_eq!(unknown.len(), 1, "{metrics:?}");
    assert_eq!(unknown[0]["value"], 1.0);
    assert!(
        metrics.iter().all(|m| m["name"] != "d8_gpu_feature_gate_enabled"),
        "no gate is reported off or on from what could not be read: {metrics:?}"
    );
}

#[test]
fn list_works_with_an_empty_environment_and_matches_config() {
    let out = Command::new(BINARY)
        .args(["hook", "list"])
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("Found 5 items:\n"), "{text}");
    assert!(text.contains("2 - bootstrap-nodes"), "{text}");

    let out = Command::new(BINARY).args(["hook", "config"]).output().unwrap();
    let config: Value = serde_json::from_slice(&out.stdout).expect("hook config prints only JSON");
    assert_eq!(config["version"], "v1");
    let hooks = config["hooks"].as_array().unwrap();
    let names: Vec<&str> = hooks.iter().map(|h| h["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "feature-gates",
            "tls-certificates",
            "bootstrap-nodes",
            "cleanup-on-disable",
            "node-groups"
        ]
    );
    // No hook installs CRDs (addon-operator installs crds/) or runs at startup.
    assert!(hooks.iter().all(|h| h.get("onStartup").is_none()), "{config}");
    assert_eq!(hooks[0]["beforeHelm"], 1);
    assert_eq!(hooks[3]["afterDeleteHelm"], 10);
    let node_groups: Vec<(&str, &str)> = hooks[4]["kubernetes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["apiVersion"].as_str().unwrap(), b["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(node_groups, [("deckhouse.io/v1", "NodeGroup"), ("v1", "Node")]);
    let bindings: Vec<(&str, bool)> = hooks[2]["kubernetes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["kind"].as_str().unwrap(), b["executeHookOnEvent"].as_bool().unwrap()))
        .collect();
    assert_eq!(bindings, [("PhysicalGPU", true), ("Node", true)]);
    assert_eq!(hooks[1]["kubernetes"][0]["executeHookOnEvent"], false);
    assert_eq!(config["readiness"]["schedule"][0]["crontab"], "*/15 * * * * *");
}

#[test]
fn an_unknown_hook_fails_with_a_message_on_stderr() {
    let out = Command::new(BINARY).args(["hook", "run", "9"]).output().unwrap();
    assert!(!out.status.success());
    let message: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert!(
        message["message"].as_str().unwrap().contains("no hook \"9\""),
        "{message}"
    );
}

#[test]
fn bootstrap_nodes_golden_fixtures() {
    for case in ["no-gpus", "inventoried", "driver-ready-on-one-node"] {
        let dir = fixtures().join("bootstrap-nodes").join(case);
        let read =
            |name: &str| -> Value { serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap() };
        let written = run_hook_against(BOOTSTRAP_NODES, &read("binding-context.json"), &json!({}), None);
        assert_eq!(
            written.values_patch,
            json!([]),
            "case {case}: node placement is no value"
        );
        let expected = dir.join("expected-kubernetes-patch.json");
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(
                &expected,
                serde_json::to_string_pretty(&written.objects).unwrap() + "\n",
            )
            .unwrap();
        }
        assert_eq!(
            Value::Array(written.objects),
            read("expected-kubernetes-patch.json"),
            "case {case}"
        );
    }
}

/// The patch's value at `path`.
fn patched<'a>(patch: &'a Value, path: &str) -> &'a Value {
    &patch.as_array().unwrap().iter().find(|op| op["path"] == path).unwrap()["value"]
}

/// The Secret snapshots the templates would render from a tls-certificates patch.
fn secrets_from(patch: &Value) -> Value {
    use base64::Engine;
    let b64 = |v: &Value| base64::engine::general_purpose::STANDARD.encode(v.as_str().unwrap());
    let ca = patched(patch, "/gpu/internal/rootCA");
    let leaf = patched(patch, "/gpu/internal/metrics/cert");
    let webhook = patched(patch, "/gpu/internal/admissionWebhook/cert");
    json!([{"binding": "beforeHelm", "snapshots": {"secrets": [
        {"filterResult": {"name": "gpu-root-ca", "ca": null, "crt": b64(&ca["crt"]), "key": b64(&ca["key"])}},
        {"filterResult": {"name": "gpu-metrics-tls", "ca": b64(&leaf["ca"]), "crt": b64(&leaf["crt"]), "key": b64(&leaf["key"])}},
        {"filterResult": {"name": "gpu-dra-controller-webhook-tls", "ca": b64(&webhook["ca"]), "crt": b64(&webhook["crt"]), "key": b64(&webhook["key"])}}
    ]}}])
}

#[test]
fn tls_certificates_are_kept_from_their_secrets_and_renewed_when_names_change() {
    let values = json!({"global": {"discovery": {"clusterDomain": "cluster.local"}}});
    let first = run_hook(
        TLS_CERTIFICATES,
        &json!([{"binding": "beforeHelm", "snapshots": {"secrets": []}}]),
        &values,
    );
    let ca = patched(&first, "/gpu/internal/rootCA");
    let leaf = patched(&first, "/gpu/internal/metrics/cert");
    assert!(ca["crt"].as_str().unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
    assert_eq!(leaf["ca"], ca["crt"]);
    let webhook = patched(&first, "/gpu/internal/admissionWebhook/cert");
    assert_eq!(webhook["ca"], ca["crt"]);
    assert_ne!(webhook["crt"], leaf["crt"], "the webhook has a certificate of its own");

    let second = run_hook(TLS_CERTIFICATES, &secrets_from(&first), &values);
    assert_eq!(second, first, "a current CA and certificate are kept as they are");

    let renamed = json!({"global": {"discovery": {"clusterDomain": "corp.example"}}});
    let third = run_hook(TLS_CERTIFICATES, &secrets_from(&first), &renamed);
    assert_eq!(patched(&third, "/gpu/internal/rootCA"), ca, "the CA stays");
    assert_ne!(
        patched(&third, "/gpu/internal/metrics/cert")["crt"],
        leaf["crt"],
        "new names, new certificate"
    );
    assert_ne!(
        patched(&third, "/gpu/internal/admissionWebhook/cert")["crt"],
        webhook["crt"],
        "new names, new webhook certificate"
    );
}
