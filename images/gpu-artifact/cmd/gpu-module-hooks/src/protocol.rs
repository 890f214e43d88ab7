//! The batch-hook protocol of addon-operator (module-sdk's CLI): what `hook config` prints, what a
//! `hook run` reads (binding contexts, values) and the files it writes (a JSON Patch of values, a stream
//! of Kubernetes object operations, a stream of metric operations). Plain data and file I/O; no
//! Kubernetes client here.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};

/// The module's values key (camelCase module name) and the queue of its hooks.
pub const MODULE_KEY: &str = "gpu";
pub const QUEUE: &str = "modules/gpu";

/// One hook's entry of the `hook config` JSON (module-sdk `pkg/hook/dto.go` field names).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookConfig {
    pub config_version: &'static str,
    pub metadata: HookMetadata,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_startup: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before_helm: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_delete_helm: Option<u32>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub schedule: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kubernetes: Vec<Value>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HookMetadata {
    pub name: &'static str,
    pub path: &'static str,
}

/// A kubernetes binding that only feeds snapshots through `jq_filter` (never the whole object).
pub fn snapshot_binding(name: &str, api_version: &str, kind: &str, jq_filter: &str, run_on_events: bool) -> Value {
    json!({
        "name": name,
        "apiVersion": api_version,
        "kind": kind,
        "jqFilter": jq_filter,
        "executeHookOnEvent": run_on_events,
        "executeHookOnSynchronization": run_on_events,
        "waitForSynchronization": false,
        "keepFullObjectsInMemory": false,
        "queue": QUEUE,
    })
}

/// What one `hook run` sees: snapshots by binding name (filter results, flattened across contexts as
/// module-sdk does) and the module's values.
#[derive(Debug, Default)]
pub struct HookInput {
    pub snapshots: BTreeMap<String, Vec<Value>>,
    pub values: Value,
}

impl HookInput {
    /// Reads `BINDING_CONTEXT_PATH` and `VALUES_PATH`.
    pub fn from_env() -> anyhow::Result<Self> {
        let contexts = read_json_env("BINDING_CONTEXT_PATH")?.unwrap_or(json!([]));
        let values = read_json_env("VALUES_PATH")?.unwrap_or(json!({}));
        Self::from_parts(&contexts, values)
    }

    pub fn from_parts(contexts: &Value, values: Value) -> anyhow::Result<Self> {
        let Some(contexts) = contexts.as_array() else {
            bail!("binding context is not a JSON array");
        };
        let mut snapshots: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for context in contexts {
            let Some(groups) = context.get("snapshots").and_then(Value::as_object) else {
                continue;
            };
            for (binding, items) in groups {
                let entry = snapshots.entry(binding.clone()).or_default();
                for item in items.as_array().into_iter().flatten() {
                    let result = item.get("filterResult").cloned().unwrap_or(Value::Null);
                    // module-sdk treats an empty filter result as no object.
                    if !(result.is_null() || result == json!({}) || result == json!("{}")) {
                        entry.push(result);
                    }
                }
            }
        }
        Ok(Self { snapshots, values })
    }

    pub fn snapshot(&self, binding: &str) -> &[Value] {
        self.snapshots.get(binding).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The filter results of `binding` that parse as `T` (one that does not is an object the filter
    /// could not shape, e.g. of an older version: left out).
    pub fn snapshot_of<T: serde::de::DeserializeOwned>(&self, binding: &str) -> Vec<T> {
        self.snapshot(binding)
            .iter()
            .filter_map(|item| serde_json::from_value(item.clone()).ok())
            .collect()
    }

    /// A value by JSON pointer under the whole values document (e.g. `/global/discovery/clusterDomain`).
    pub fn value(&self, pointer: &str) -> Option<&Value> {
        self.values.pointer(pointer)
    }
}

/// What a hook hands back: values operations (only `add`, under the module's key), Kubernetes
/// object operations (`object_patch`) and metric operations.
#[derive(Debug, Default, PartialEq)]
pub struct HookOutput {
    pub values_patch: Vec<Value>,
    pub kubernetes_patch: Vec<Value>,
    pub metrics: Vec<Value>,
}

impl HookOutput {
    /// `add` of `value` at `/gpu/<path>`; the parent must exist (openapi/values.yaml gives every
    /// intermediate object a default).
    pub fn set_value(&mut self, path: &str, value: Value) {
        self.values_patch
            .push(json!({"op": "add", "path": format!("/{MODULE_KEY}/{path}"), "value": value}));
    }

    /// The gauge `name{labels} value` in metric group `group`: addon-operator expires the group's
    /// previous series first, so a series not set again disappears.
    pub fn set_gauge(&mut self, group: &str, name: &str, labels: Value, value: f64) {
        self.metrics
            .push(json!({"group": group, "name": name, "action": "set", "value": value, "labels": labels}));
    }

    /// Drops every series of metric group `group` (a run that has nothing to report).
    pub fn expire_group(&mut self, group: &str) {
        self.metrics.push(json!({"group": group, "action": "expire"}));
    }

    /// Writes the files named by `VALUES_JSON_PATCH_PATH`, `KUBERNETES_PATCH_PATH` and `METRICS_PATH`.
    pub fn write_to_env_files(&self) -> anyhow::Result<()> {
        if let Some(path) = env_path("VALUES_JSON_PATCH_PATH") {
            std::fs::write(&path, serde_json::to_vec(&self.values_patch)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
        write_stream("KUBERNETES_PATCH_PATH", &self.kubernetes_patch)?;
        write_stream("METRICS_PATH", &self.metrics)
    }
}

/// Newline-delimited JSON, the form module-sdk writes object patches and metrics in.
fn write_stream(key: &str, items: &[Value]) -> anyhow::Result<()> {
    let Some(path) = env_path(key) else { return Ok(()) };
    let mut stream = String::new();
    for item in items {
        stream.push_str(&serde_json::to_string(item)?);
        stream.push('\n');
    }
    std::fs::write(&path, stream).with_context(|| format!("writing {}", path.display()))
}

fn env_path(key: &str) -> Option<PathBuf> {
    std::env::var_os(key).filter(|v| !v.is_empty()).map(PathBuf::from)
}

fn read_json_env(key: &str) -> anyhow::Result<Option<Value>> {
    let Some(path) = env_path(key) else { return Ok(None) };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {key}={}", path.display()))?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    serde_json::from_str(&text)
        .map(Some)
        .with_context(|| format!("{key}: not JSON"))
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_flattened_across_contexts_and_empty_results_dropped() {
        let contexts = json!([
            {"binding": "beforeHelm", "snapshots": {"gpus": [{"filterResult": {"node": "a"}}, {"filterResult": {}}]}},
            {"binding": "gpus", "type": "Group", "snapshots": {"gpus": [{"filterResult": {"node": "b"}}]}}
        ]);
        let input = HookInput::from_parts(&contexts, json!({})).unwrap();
        assert_eq!(input.snapshot("gpus"), &[json!({"node": "a"}), json!({"node": "b"})]);
        assert!(input.snapshot("other").is_empty());
    }

    #[test]
    fn values_are_added_under_the_module_key() {
        let mut out = HookOutput::default();
        out.set_value("internal/kubernetes", json!({"featureGates": []}));
        assert_eq!(
            out.values_patch,
            vec![json!({"op": "add", "path": "/gpu/internal/kubernetes", "value": {"featureGates": []}})]
        );
    }
}
