//! The module's chart in every tested state (fixture files of tools/test/module-fixtures over
//! global.yaml): each fixture file is part of a state and renders, the real API server (with our
//! CRDs) accepts every rendered object by server-side dry-run apply, and every field helm requires
//! has no default. Kinds the test bed does not serve (monitoring and VPA CRDs of other modules) are
//! listed.

mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Api, discovery};
use serde_json::{Value, json};
use support::components::{install_crds, repo_root};
use support::rendered_rbac::{MODULE_NAMESPACE, of_kind, render_chart};
use testbed::TestCluster;

/// Kinds the chart renders that only other Deckhouse modules install CRDs for.
const NOT_SERVED_BY_THE_TEST_BED: [&str; 6] = [
    "GrafanaDashboardDefinition",
    "NodeGroupConfiguration",
    "PodMonitor",
    "PrometheusRule",
    "ServiceMonitor",
    "VerticalPodAutoscaler",
];

/// Every state the chart is tested in: fixture files of tools/test/module-fixtures applied over
/// global.yaml in order. Each fixture file appears in at least one state.
const STATES: [&[&str]; 8] = [
    &["driver-ready"],
    &["driver-ready", "dra-gates-off"],
    &["driver-ready", "high-availability"],
    &["driver-ready", "kubernetes-newest"],
    &["driver-ready", "containerized-driver"],
    &["driver-ready", "managed-control-plane"],
    &["driver-ready", "current-module-names-only"],
    &["driver-ready", "node-manager-gpu-node-groups"],
];

#[test]
fn every_fixture_file_is_a_tested_state_and_renders() {
    let dir = repo_root().join("tools/test/module-fixtures");
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .trim_end_matches(".yaml")
                .to_owned()
        })
        .filter(|name| name != "global")
        .collect();
    let tested: BTreeSet<String> = STATES.iter().flat_map(|s| s.iter().map(|f| f.to_string())).collect();
    assert_eq!(
        files,
        tested,
        "fixture files of {} against the tested states",
        dir.display()
    );
    for states in STATES {
        let objects = render_chart(states);
        assert!(of_kind(&objects, "DaemonSet").count() >= 5, "{states:?}");
    }
}

/// The expressions of a node component's required node affinity.

#[tokio::test]
async fn the_api_server_accepts_every_rendered_object() {
    let cluster = TestCluster::get().await.unwrap();
    let client = cluster.client();
    install_crds(&client).await;
    let apply = PatchParams::apply("module-chart-test").force();
    let namespace: Namespace = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": MODULE_NAMESPACE}}))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .patch(MODULE_NAMESPACE, &apply, &Patch::Apply(&namespace))
        .await
        .unwrap();

    let mut not_served = BTreeSet::new();
    for states in STATES {
        for object in render_chart(states) {
            let object: DynamicObject = serde_json::from_value(object).unwrap();
            let types = object.types.clone().unwrap();
            let (group, version) = types.api_version.split_once('/').unwrap_or(("", &types.api_version));
            let gvk = GroupVersionKind::gvk(group, version, &types.kind);
            let Ok((resource, caps)) = discovery::pinned_kind(&client, &gvk).await else {
                not_served.insert(types.kind.clone());
                continue;
            };
            let name = object.metadata.name.clone().unwrap();
            let api: Api<DynamicObject> = match (caps.scope, object.metadata.namespace.as_deref()) {
                (discovery::Scope::Namespaced, namespace) => {
                    Api::namespaced_with(client.clone(), namespace.unwrap_or(MODULE_NAMESPACE), &resource)
                }
                (discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
            };
            api.patch(&name, &apply.clone().dry_run(), &Patch::Apply(&object))
                .await
                .unwrap_or_else(|e| panic!("{states:?}: {} {name} rejected: {e}", types.kind));
        }
    }
    assert_eq!(
        not_served,
        NOT_SERVED_BY_THE_TEST_BED.iter().map(|k| k.to_string()).collect()
    );
}

/// addon-operator turns `x-required-for-helm` into JSON Schema `required`, a presence check made after
/// defaults are applied: on a field with a default it never holds Helm back. Every field it names has
/// none, and it names at least the serving certificate.
#[test]
fn every_field_required_for_helm_has_no_default() {
    fn walk(schema: &Value, path: &str, found: &mut Vec<String>) {
        if let Some(required) = schema["x-required-for-helm"].as_array() {
            for field in required {
                let field = field.as_str().unwrap();
                let property = &schema["properties"][field];
                assert!(property.is_object(), "{path}.{field} is not a property");
                assert!(
                    property.get("default").is_none(),
                    "{path}.{field} has a default, so x-required-for-helm does nothing"
                );
                found.push(format!("{path}.{field}"));
            }
        }
        for (name, property) in schema["properties"].as_object().into_iter().flatten() {
            walk(property, &format!("{path}.{name}"), found);
        }
    }
    let values: Value =
        serde_yaml::from_str(&std::fs::read_to_string(repo_root().join("openapi/values.yaml")).unwrap()).unwrap();
    let mut found = Vec::new();
    walk(&values, "gpu", &mut found);
    assert!(found.contains(&"gpu.internal.metrics.cert.crt".to_owned()), "{found:?}");
}
