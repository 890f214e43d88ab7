//! The module's hooks run as addon-operator runs them: `hook config` says which hooks exist, when
//! they run (`onStartup`, `beforeHelm` and their order) and what they watch; each run gets the
//! binding context with every kubernetes binding's snapshot (objects listed from the API server,
//! each passed through the binding's jqFilter by the real `jq`), the values, and hands back a JSON
//! Patch of values and Kubernetes operations.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use kube::api::{DynamicObject, GroupVersionKind, ListParams};
use kube::{Api, Client, discovery};
use serde_json::{Value, json};

/// One hook of `hook config`.
#[derive(Debug, Clone)]
pub struct HookEntry {
    pub index: usize,
    pub name: String,
    pub on_startup: Option<i64>,
    pub before_helm: Option<i64>,
    pub kubernetes: Vec<Value>,
}

pub struct Hooks {
    pub binary: PathBuf,
    pub entries: Vec<HookEntry>,
    pub env: Vec<(String, String)>,
}

impl Hooks {
    pub fn load(binary: &Path, env: Vec<(String, String)>) -> anyhow::Result<Self> {
        let out = Command::new(binary)
            .args(["hook", "config"])
            .envs(env.clone())
            .output()?;
        if !out.status.success() {
            bail!(
                "{} hook config: {}",
                binary.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let config: Value = serde_json::from_slice(&out.stdout).context("hook config is not JSON")?;
        let entries = config["hooks"]
            .as_array()
            .context("hook config has no hooks")?
            .iter()
            .enumerate()
            .map(|(index, hook)| HookEntry {
                index,
                name: hook["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                on_startup: hook["onStartup"].as_i64(),
                before_helm: hook["beforeHelm"].as_i64(),
                kubernetes: hook["kubernetes"].as_array().cloned().unwrap_or_default(),
            })
            .collect();
        Ok(Self {
            binary: binary.to_path_buf(),
            entries,
            env,
        })
    }

    /// The hooks of one phase, in their order.
    pub fn phase(&self, order: impl Fn(&HookEntry) -> Option<i64>) -> Vec<HookEntry> {
        let mut hooks: Vec<HookEntry> = self.entries.iter().filter(|h| order(h).is_some()).cloned().collect();
        hooks.sort_by_key(|h| (order(h), h.index));
        hooks
    }

    /// Runs `hook run <index>` with `binding` (`onStartup` or `beforeHelm`) and applies what it returns:
    /// the values patch to `values`, the Kubernetes operations to the cluster.
    pub async fn run(
        &self,
        client: &Client,
        hook: &HookEntry,
        binding: &str,
        values: &mut Value,
    ) -> anyhow::Result<()> {
        let mut snapshots = serde_json::Map::new();
        for watched in &hook.kubernetes {
            let name = watched["name"].as_str().unwrap_or_default().to_owned();
            snapshots.insert(name, Value::Array(snapshot(client, watched).await?));
        }
        let dir = tempdir()?;
        let context = json!([{"binding": binding, "snapshots": snapshots}]);
        std::fs::write(dir.join("context.json"), context.to_string())?;
        std::fs::write(dir.join("values.json"), values.to_string())?;
        let out = Command::new(&self.binary)
            .args(["hook", "run", &hook.index.to_string()])
            .envs(self.env.clone())
            .env("BINDING_CONTEXT_PATH", dir.join("context.json"))
            .env("VALUES_PATH", dir.join("values.json"))
            .env("VALUES_JSON_PATCH_PATH", dir.join("values-patch.json"))
            .env("KUBERNETES_PATCH_PATH", dir.join("kubernetes-patch.jsonl"))
            .output()?;
        if !out.status.success() {
            bail!(
                "hook {} ({binding}): {}",
                hook.name,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let patch_text = written_by_hook(&dir.join("values-patch.json"))?;
        if !patch_text.trim().is_empty() {
            let patch: json_patch::Patch = serde_json::from_str(&patch_text).context("values patch")?;
            json_patch::patch(values, &patch).with_context(|| format!("hook {}: values patch", hook.name))?;
        }
        let operations = written_by_hook(&dir.join("kubernetes-patch.jsonl"))?;
        for line in operations.lines().filter(|l| !l.trim().is_empty()) {
            kubernetes_operation(client, &serde_json::from_str(line)?).await?;
        }
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }
}

/// A file the hook writes when it has something to say: none is nothing (the protocol lets a hook
/// leave it unwritten); any other failure is an error.
fn written_by_hook(path: &Path) -> anyhow::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(e).with_context(|| format!("read {}", path.display())),
    }
}

/// `[{"filterResult": ...}]` for every object the binding selects.
async fn snapshot(client: &Client, binding: &Value) -> anyhow::Result<Vec<Value>> {
    let api_version = binding["apiVersion"].as_str().unwrap_or("v1");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, binding["kind"].as_str().unwrap_or_default());
    // A kind the API server does not serve yet (a CRD not applied) has no objects.
    let Ok((resource, _)) = discovery::pinned_kind(client, &gvk).await else {
        return Ok(Vec::new());
    };
    let names: Option<Vec<&str>> = binding["nameSelector"]["matchNames"]
        .as_array()
        .map(|n| n.iter().filter_map(Value::as_str).collect());
    let namespaces: Option<Vec<&str>> = binding["namespace"]["nameSelector"]["matchNames"]
        .as_array()
        .map(|n| n.iter().filter_map(Value::as_str).collect());
    let mut params = ListParams::default();
    if let Some(labels) = binding["labelSelector"]["matchLabels"].as_object() {
        let selector: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect();
        params = params.labels(&selector.join(","));
    }
    let apis: Vec<Api<DynamicObject>> = match &namespaces {
        Some(list) => list
            .iter()
            .map(|ns| Api::namespaced_with(client.clone(), ns, &resource))
            .collect(),
        None => vec![Api::all_with(client.clone(), &resource)],
    };
    let filter = binding["jqFilter"].as_str().unwrap_or(".");
    let mut results = Vec::new();
    for api in apis {
        for object in api.list(&params).await?.items {
            let name = object.metadata.name.clone().unwrap_or_default();
            if names.as_ref().is_some_and(|n| !n.contains(&name.as_str())) {
                continue;
            }
            let mut object = serde_json::to_value(&object)?;
            object["apiVersion"] = json!(api_version);
            object["kind"] = binding["kind"].clone();
            results.push(json!({"filterResult": jq(filter, &object)?}));
        }
    }
    Ok(results)
}

/// The real jq, as shell-operator applies a jqFilter to one object.
fn jq(filter: &str, object: &Value) -> anyhow::Result<Value> {
    let dir = tempdir()?;
    std::fs::write(dir.join("object.json"), object.to_string())?;
    let out = Command::new("jq")
        .arg("-c")
        .arg(filter)
        .arg(dir.join("object.json"))
        .output()?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        bail!("jq {filter:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8(out.stdout)?;
    Ok(serde_json::from_str(text.trim()).unwrap_or(Value::Null))
}

/// One line of the hook's Kubernetes patch stream.
async fn kubernetes_operation(client: &Client, operation: &Value) -> anyhow::Result<()> {
    let kind = operation["operation"].as_str().unwrap_or_default();
    match kind {
        "Create" | "CreateOrUpdate" | "CreateIfNotExists" => {
            super::manifests::apply_object(client, &operation["object"], "gpu-module-hooks").await
        }
        "MergePatch" => super::manifests::merge_patch_object(client, operation).await,
        other => bail!("the test bed's operator does not run Kubernetes operation {other:?}"),
    }
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "module-operator-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
