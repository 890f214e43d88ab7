//! The chart rendered by the real helm with the module's values, and the rendered objects applied to
//! the cluster (server-side apply, as the module's owner), with what a new render no longer has
//! deleted as `helm upgrade` deletes it.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::{Api, Client, discovery};
use serde::Deserialize;
use serde_json::Value;

/// The release and namespace Deckhouse installs the module as.
pub const RELEASE: &str = "gpu";
pub const NAMESPACE: &str = "d8-gpu";

/// Every object `helm template` renders from `values`.
pub fn render(helm: &Path, chart: &Path, values: &Value) -> anyhow::Result<Vec<Value>> {
    let file = std::env::temp_dir().join(format!("module-operator-values-{}.json", std::process::id()));
    std::fs::write(&file, values.to_string())?;
    let out = Command::new(helm)
        .args(["template", RELEASE])
        .arg(chart)
        .args(["--namespace", NAMESPACE, "-f"])
        .arg(&file)
        .output()
        .with_context(|| format!("run {}", helm.display()))?;
    let _ = std::fs::remove_file(&file);
    if !out.status.success() {
        bail!("helm template: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let text = String::from_utf8(out.stdout)?;
    Ok(serde_yaml::Deserializer::from_str(&text)
        .filter_map(|document| Value::deserialize(document).ok())
        .filter(|object| object.get("kind").is_some())
        .collect())
}

/// An object's identity: apiVersion, kind, namespace, name.
pub type ObjectKey = (String, String, String, String);

pub fn key(object: &Value) -> ObjectKey {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    (
        text(&object["apiVersion"]),
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"]),
    )
}

async fn api_for(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: &str,
) -> anyhow::Result<Api<DynamicObject>> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("the API server does not serve {api_version} {kind}"))?;
    Ok(if capabilities.scope == discovery::Scope::Namespaced {
        Api::namespaced_with(
            client.clone(),
            if namespace.is_empty() { NAMESPACE } else { namespace },
            &resource,
        )
    } else {
        Api::all_with(client.clone(), &resource)
    })
}

pub async fn apply_object(client: &Client, object: &Value, manager: &str) -> anyhow::Result<()> {
    let (api_version, kind, namespace, name) = key(object);
    let api = api_for(client, &api_version, &kind, &namespace).await?;
    api.patch(&name, &PatchParams::apply(manager).force(), &Patch::Apply(object))
        .await
        .with_context(|| format!("apply {kind} {namespace}/{name}"))?;
    Ok(())
}

/// A hook's `MergePatch` operation (bootstrap-nodes' Node label), applied as shell-operator applies it:
/// a JSON merge patch of the object or its `/status`; a missing object is skipped when the operation
/// says `ignoreMissingObject`.
pub async fn merge_patch_object(client: &Client, operation: &Value) -> anyhow::Result<()> {
    let text = |key: &str| operation[key].as_str().unwrap_or_default();
    let api = api_for(client, text("apiVersion"), text("kind"), text("namespace")).await?;
    let patch = Patch::Merge(&operation["mergePatch"]);
    let params = PatchParams::default();
    let result = if text("subresource") == "/status" {
        api.patch_status(text("name"), &params, &patch).await
    } else {
        api.patch(text("name"), &params, &patch).await
    };
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 && operation["ignoreMissingObject"] == true => Ok(()),
        Err(error) => Err(error).with_context(|| format!("merge patch {} {}", text("kind"), text("name"))),
    }
}

/// What addon-operator does before a module's hooks run: applies every CRD of the module's `crds/`
/// (not the `doc-*` translations) and waits until each is established.
pub async fn install_crds(client: &Client, chart: &Path) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(chart.join("crds"))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    for file in files {
        let file_name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        if file_name.starts_with("doc-") || !file_name.ends_with(".yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let crd = Value::deserialize(document).with_context(|| format!("parse {}", file.display()))?;
            if crd.get("kind").is_none() {
                continue;
            }
            apply_object(client, &crd, "deckhouse").await?;
            names.push(key(&crd).3);
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in &names {
        let established = |crd: Option<&CustomResourceDefinition>| {
            crd.and_then(|c| c.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Established" && c.status == "True"))
        };
        tokio::time::timeout(
            std::time::Duration::from_secs(60),
            await_condition(crds.clone(), name, established),
        )
        .await
        .with_context(|| format!("CRD {name} not established within 60 s"))??;
    }
    Ok(names)
}

/// Whether an apply failed only because the cluster does not serve the kind: another Deckhouse
/// module's (NodeGroupConfiguration of node-manager, monitoring CRDs of prometheus) that the test bed
/// does not run. Deckhouse would apply them; here they are listed as skipped.
pub fn not_served(error: &anyhow::Error) -> bool {
    format!("{error:#}").contains("the API server does not serve")
}

/// Applies `objects` (namespaces first) and deletes what `previous` had that `objects` has not.
/// Returns the keys applied; failures are collected, not fatal, and the next round retries them.
pub async fn apply_all(
    client: &Client,
    objects: &[Value],
    previous: &BTreeSet<ObjectKey>,
) -> (BTreeSet<ObjectKey>, Vec<String>) {
    let mut ordered: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Namespace").collect();
    ordered.extend(objects.iter().filter(|o| o["kind"] != "Namespace"));
    let mut applied = BTreeSet::new();
    let mut errors = Vec::new();
    for object in ordered {
        match apply_object(client, object, "deckhouse").await {
            Ok(()) => {
                applied.insert(key(object));
            }
            Err(error) if not_served(&error) => {}
            Err(error) => errors.push(format!("{error:#}")),
        }
    }
    let wanted: BTreeSet<ObjectKey> = objects.iter().map(key).collect();
    for (api_version, kind, namespace, name) in previous.difference(&wanted) {
        let deleted = async {
            let api = api_for(client, api_version, kind, namespace).await?;
            api.delete(name, &DeleteParams::default()).await?;
            anyhow::Ok(())
        };
        if let Err(error) = deleted.await {
            errors.push(format!("delete {kind} {namespace}/{name}: {error:#}"));
        }
    }
    (applied, errors)
}
