//! The module's hooks binary run the way addon-operator runs it (`hook run <index>` / `hook ready` with
//! the protocol's files, hooks found by name in `hook config`), and the object operations it writes
//! applied to the real API server the way shell-operator applies them (CreateOrUpdate, Delete,
//! MergePatch, JSONPatch, with their NotFound rules), so a test sees what the hook does to a cluster.

use std::path::Path;
use std::process::Command;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, discovery};
use serde_json::{Value, json};
use testbed::{TestCluster, component_binary};

/// What one hook run wrote.
#[derive(Debug)]
pub struct HookRun {
    pub values_patch: Value,
    pub kubernetes_patch: Vec<Value>,
    pub metrics: Vec<Value>,
}

/// The index of hook `name` in `hook config`.
pub fn hook_index(name: &str) -> String {
    let binary = component_binary("gpu-module-hooks").unwrap();
    let out = Command::new(binary).args(["hook", "config"]).output().unwrap();
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hooks = config["hooks"].as_array().unwrap();
    let index = hooks.iter().position(|h| h["metadata"]["name"] == name);
    index
        .unwrap_or_else(|| panic!("no hook {name} in {config}"))
        .to_string()
}

/// Runs `hook run <index of name>` (or `hook ready` for "readiness") against the cluster of
/// `kubeconfig` with `contexts` and `values`.
pub fn run_hook(name: &str, kubeconfig: &Path, contexts: &Value, values: &Value) -> HookRun {
    let binary = component_binary("gpu-module-hooks").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = |file: &str| dir.path().join(file);
    std::fs::write(path("context.json"), contexts.to_string()).unwrap();
    std::fs::write(path("values.json"), values.to_string()).unwrap();
    for file in ["values-patch.json", "kubernetes-patch.json", "metrics.json"] {
        std::fs::write(path(file), "").unwrap();
    }
    let mut command = Command::new(binary);
    if name == "readiness" {
        command.args(["hook", "ready"]);
    } else {
        command.args(["hook", "run", &hook_index(name)]);
    }
    let out = command
        .env("KUBECONFIG", kubeconfig)
        .env("MODULE_NAME", "gpu")
        .env("BINDING_CONTEXT_PATH", path("context.json"))
        .env("VALUES_PATH", path("values.json"))
        .env("VALUES_JSON_PATCH_PATH", path("values-patch.json"))
        .env("KUBERNETES_PATCH_PATH", path("kubernetes-patch.json"))
        .env("METRICS_PATH", path("metrics.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hook {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = |file: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(path(file)).unwrap();
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let values_patch = std::fs::read_to_string(path("values-patch.json")).unwrap();
    HookRun {
        values_patch: serde_json::from_str(if values_patch.is_empty() { "[]" } else { &values_patch }).unwrap(),
        kubernetes_patch: lines("kubernetes-patch.json"),
        metrics: lines("metrics.json"),
    }
}

/// The binding context addon-operator would give hook `name` now: every object each of its kubernetes
/// bindings selects, listed from the API server and passed through the binding's jqFilter by the real
/// `jq` (as shell-operator filters), as one `Synchronization`-like context.
pub async fn binding_context(client: &Client, name: &str) -> Value {
    let binary = component_binary("gpu-module-hooks").unwrap();
    let out = Command::new(binary).args(["hook", "config"]).output().unwrap();
    let config: Value = serde_json::from_slice(&out.stdout).unwrap();
    let hook = config["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no hook {name} in {config}"))
        .clone();
    let mut snapshots = serde_json::Map::new();
    for binding in hook["kubernetes"].as_array().into_iter().flatten() {
        let api = api_for(
            client,
            binding["apiVersion"].as_str().unwrap(),
            binding["kind"].as_str().unwrap(),
            None,
        )
        .await;
        let filter = binding["jqFilter"].as_str().unwrap();
        let mut results = Vec::new();
        for object in api.list(&ListParams::default()).await.unwrap().items {
            let mut jq = Command::new("jq")
                .args(["-c", filter])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("jq (tools/install/deps.sh installs it)");
            use std::io::Write;
            jq.stdin
                .take()
                .unwrap()
                .write_all(serde_json::to_string(&object).unwrap().as_bytes())
                .unwrap();
            let out = jq.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "jq {filter}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            results.push(json!({"filterResult": serde_json::from_slice::<Value>(&out.stdout).unwrap()}));
        }
        snapshots.insert(binding["name"].as_str().unwrap().to_owned(), Value::Array(results));
    }
    json!([{"binding": "beforeHelm", "snapshots": snapshots}])
}

async fn api_for(client: &Client, api_version: &str, kind: &str, namespace: Option<&str>) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let (resource, caps) = discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .unwrap_or_else(|e| panic!("{api_version} {kind} is not served: {e}"));
    match (caps.scope, namespace) {
        (discovery::Scope::Namespaced, Some(namespace)) => Api::namespaced_with(client.clone(), namespace, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}

fn not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Applies each operation as shell-operator does; panics with the operation on an error it would
/// report.
pub async fn apply_object_patches(client: &Client, operations: &[Value]) {
    for op in operations {
        let str_of = |key: &str| op[key].as_str().unwrap_or_default();
        match str_of("operation") {
            "CreateOrUpdate" => {
                let object: DynamicObject = serde_json::from_value(op["object"].clone()).unwrap();
                let types = object.types.clone().unwrap();
                let api = api_for(
                    client,
                    &types.api_version,
                    &types.kind,
                    object.metadata.namespace.as_deref(),
                )
                .await;
                let name = object.metadata.name.clone().unwrap();
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 409 => {
                        let mut replacement = object.clone();
                        replacement.metadata.resource_version = api.get(&name).await.unwrap().metadata.resource_version;
                        api.replace(&name, &PostParams::default(), &replacement)
                            .await
                            .unwrap_or_else(|e| panic!("{op}: {e}"));
                    }
                    Err(e) => panic!("{op}: {e}"),
                }
            }
            "Delete" => {
                let namespace = op["namespace"].as_str();
                let api = api_for(client, str_of("apiVersion"), str_of("kind"), namespace).await;
                if let Err(e) = api.delete(str_of("name"), &DeleteParams::foreground()).await {
                    assert!(not_found(&e), "{op}: {e}");
                }
            }
            "MergePatch" => {
                let api = api_for(client, str_of("apiVersion"), str_of("kind"), op["namespace"].as_str()).await;
                let patch = Patch::Merge(op["mergePatch"].clone());
                let params = PatchParams::default();
                let result = if str_of("subresource") == "/status" {
                    api.patch_status(str_of("name"), &params, &patch).await
                } else {
                    api.patch(str_of("name"), &params, &patch).await
                };
                if let Err(e) = result {
                    assert!(op["ignoreMissingObject"] == true && not_found(&e), "{op}: {e}");
                }
            }
            "JSONPatch" => {
                let api = api_for(client, str_of("apiVersion"), str_of("kind"), op["namespace"].as_str()).await;
                let patch: json_patch::Patch = serde_json::from_value(op["jsonPatch"].clone()).unwrap();
                let result = api
                    .patch(str_of("name"), &PatchParams::default(), &Patch::Json::<()>(patch))
                    .await;
                if let Err(e) = result {
                    assert!(op["ignoreMissingObject"] == true && not_found(&e), "{op}: {e}");
                }
            }
            other => panic!("operation {other} is not one the hooks emit: {op}"),
        }
    }
}

/// The values addon-operator passes for a cluster of `version` (the hooks' `internal` empty).
pub fn values(version: &str) -> Value {
    json!({"global": {"discovery": {"kubernetesVersion": version}}, "gpu": {"internal": {}}})
}

/// The cluster's version as `global.discovery.kubernetesVersion` says it.
pub async fn version_of(cluster: &TestCluster) -> String {
    format!("1.{}.0", cluster.server_minor().await.unwrap())
}

/// The Events the hooks recorded in `default` about `kind` `name` (not the control plane's own), by
/// Event name.
pub async fn events_about(client: &kube::Client, kind: &str, name: &str) -> BTreeMap<String, Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.kind={kind},involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("gpu-module-hooks"))
        .map(|e| (e.metadata.name.clone().unwrap(), e))
        .collect()
}
