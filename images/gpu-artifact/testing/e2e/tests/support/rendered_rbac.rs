//! The module's chart as the real `helm` renders it, and the RBAC it grants each component: e2e tests
//! run components under exactly these rules, so a template change is what the tests exercise.

use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::Deserialize;
use serde_json::Value;

use super::components::repo_root;

/// The module's namespace, where every ServiceAccount of the chart lives.
pub const MODULE_NAMESPACE: &str = "d8-gpu";

/// `HELM_BIN` (what `make test` exports), else the cached build of `tools/install/helm.sh`.
pub fn helm_binary() -> PathBuf {
    if let Some(helm) = std::env::var_os("HELM_BIN").filter(|h| !h.is_empty()) {
        return PathBuf::from(helm);
    }
    let out = Command::new(repo_root().join("tools/install/helm.sh"))
        .output()
        .expect("tools/install/helm.sh runs");
    assert!(
        out.status.success(),
        "helm install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Every object `helm template` renders for the fixture states `states` (files of
/// `tools/test/module-fixtures/`, applied over `global.yaml` in order).
pub fn render_chart(states: &[&str]) -> Vec<Value> {
    render_chart_with(states, None)
}

/// [`render_chart`] with `values` (a JSON document, as YAML) applied over the states last.
pub fn render_chart_with(states: &[&str], values: Option<&Value>) -> Vec<Value> {
    let fixtures = repo_root().join("tools/test/module-fixtures");
    let mut command = Command::new(helm_binary());
    command.args(["template", "gpu"]).arg(repo_root());
    for state in std::iter::once("global").chain(states.iter().copied()) {
        command.arg("-f").arg(fixtures.join(format!("{state}.yaml")));
    }
    let extra = tempfile::NamedTempFile::new().unwrap();
    if let Some(values) = values {
        std::fs::write(extra.path(), values.to_string()).unwrap();
        command.arg("-f").arg(extra.path());
    }
    let out = command.output().expect("helm runs");
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .filter_map(|document| Value::deserialize(document).ok())
        .filter(|object| object.get("kind").is_some())
        .collect()
}

/// Rendered objects of `kind`.
pub fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |o| o["kind"] == kind)
}

/// The rules of every rendered ClusterRole bound to ServiceAccount `d8-gpu/<account>`, for the
/// DriverReady fixture (every component placed). ClusterRoles the chart binds but does not render
/// (Deckhouse's `d8:rbac-proxy` for kube-rbac-proxy sidecars) are not included.
pub fn rendered_cluster_rules(account: &str) -> Vec<PolicyRule> {
    let objects = render_chart(&["driver-ready"]);
    let roles: Vec<ClusterRole> = of_kind(&objects, "ClusterRole")
        .map(|o| serde_json::from_value(o.clone()).unwrap())
        .collect();
    let mut rules = Vec::new();
    for binding in of_kind(&objects, "ClusterRoleBinding") {
        let binding: ClusterRoleBinding = serde_json::from_value(binding.clone()).unwrap();
        let bound = binding.subjects.unwrap_or_default().iter().any(|s| {
            s.kind == "ServiceAccount" && s.name == account && s.namespace.as_deref() == Some(MODULE_NAMESPACE)
        });
        if !bound {
            continue;
        }
        if let Some(role) = roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(&binding.role_ref.name))
        {
            rules.extend(role.rules.clone().unwrap_or_default());
        }
    }
    rules
}

/// The rules of every rendered Role of the module's namespace bound (by a RoleBinding there) to
/// ServiceAccount `d8-gpu/<account>`, for the DriverReady fixture.
pub fn rendered_namespace_rules(account: &str) -> Vec<PolicyRule> {
    let objects = render_chart(&["driver-ready"]);
    let in_module_namespace = |o: &&Value| o["metadata"]["namespace"] == MODULE_NAMESPACE;
    let roles: Vec<Role> = of_kind(&objects, "Role")
        .filter(in_module_namespace)
        .map(|o| serde_json::from_value(o.clone()).unwrap())
        .collect();
    let mut rules = Vec::new();
    for binding in of_kind(&objects, "RoleBinding").filter(in_module_namespace) {
        let binding: RoleBinding = serde_json::from_value(binding.clone()).unwrap();
        let bound = binding.subjects.unwrap_or_default().iter().any(|s| {
            s.kind == "ServiceAccount" && s.name == account && s.namespace.as_deref() == Some(MODULE_NAMESPACE)
        });
        let role = roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(&binding.role_ref.name));
        if let (true, "Role", Some(role)) = (bound, binding.role_ref.kind.as_str(), role) {
            rules.extend(role.rules.clone().unwrap_or_default());
        }
    }
    rules
}
