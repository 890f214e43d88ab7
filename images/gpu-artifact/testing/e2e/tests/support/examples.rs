//! The manifests of `docs/examples`, each paired with the API it is applied through: what the
//! documentation test dry-runs and what the demo applies.

use std::path::PathBuf;

use kube::api::{DynamicObject, GroupVersionKind};
use kube::discovery::{self, Scope};
use kube::{Api, ResourceExt};
use serde::Deserialize;
use testbed::TestNamespace;

use super::components::repo_root;

pub struct DocumentedExample {
    pub file: PathBuf,
    /// `Kind/name`, for messages.
    pub label: String,
    pub api: Api<DynamicObject>,
    pub object: DynamicObject,
}

/// Every document of every file in `docs/examples`, GPUClasses first, then DeviceClasses (the order
/// an admin applies them in: the scheduler does not look again at a Pod whose extended resource had
/// no DeviceClass when it was first tried), namespaced ones bound to `ns`.
pub async fn documented_examples(ns: &TestNamespace) -> Vec<DocumentedExample> {
    let client = ns.client();
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("docs/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort_by_key(|path| {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let rank = ["gpuclass", "deviceclass"]
            .iter()
            .position(|prefix| name.starts_with(prefix))
            .unwrap_or(2);
        (rank, name)
    });
    let mut examples = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for document in serde_yaml::Deserializer::from_str(&text) {
            let object = DynamicObject::deserialize(document).unwrap();
            let types = object.types.clone().unwrap();
            let (group, version) = types.api_version.split_once('/').unwrap_or(("", &types.api_version));
            let (resource, caps) = discovery::pinned_kind(&client, &GroupVersionKind::gvk(group, version, &types.kind))
                .await
                .unwrap_or_else(|e| panic!("{}: {} not served: {e}", file.display(), types.kind));
            let api: Api<DynamicObject> = match caps.scope {
                Scope::Namespaced => Api::namespaced_with(client.clone(), ns.name(), &resource),
                Scope::Cluster => Api::all_with(client.clone(), &resource),
            };
            examples.push(DocumentedExample {
                label: format!("{}/{}", types.kind, object.name_any()),
                file: file.clone(),
                api,
                object,
            });
        }
    }
    examples
}
