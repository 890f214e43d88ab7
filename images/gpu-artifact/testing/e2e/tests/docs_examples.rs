//! Every manifest of `docs/examples/` is accepted by the real API server (server-side dry-run apply in a
//! test namespace): DeviceClass CEL compiles, claim templates and Pods are valid as written.

mod support;

use kube::Api;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{self, Scope};
use serde::Deserialize;
use support::components::repo_root;
use testbed::TestNamespace;

#[tokio::test]
async fn the_api_server_accepts_every_documented_example() {
    let ns = TestNamespace::create("docs-examples").await.unwrap();
    let client = ns.client();
    let mut applied = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(repo_root().join("docs/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
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
            let name = object.metadata.name.clone().unwrap();
            api.patch(
                &name,
                &PatchParams::apply("docs-examples").dry_run(),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {} {name} rejected: {e}", file.display(), types.kind));
            applied.push(format!("{}/{name}", types.kind));
        }
    }
    assert_eq!(applied.len(), 5, "{applied:?}");
}
