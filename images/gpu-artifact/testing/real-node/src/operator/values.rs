//! The values Deckhouse hands a module's hooks and Helm: `global` (images, discovery, enabled
//! modules, the kube-rbac-proxy CA) and the module's own key, its ModuleConfig settings with the
//! defaults of `openapi/config-values.yaml` and `openapi/values.yaml` filled in as addon-operator
//! fills them.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

/// What images.sh wrote: the registry the chart names and the digests of the imported images.
#[derive(Debug, Clone, Deserialize)]
pub struct ImagesFile {
    pub registry: String,
    pub digests: Value,
}

impl ImagesFile {
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
        Ok(serde_json::from_str(&text)?)
    }
}

/// The module's settings in the test bed's ModuleConfig. DCGM and dcgm-exporter are NVIDIA's images
/// (a closed host engine) that no registry can serve here, so monitoring.dcgm is off.
pub fn module_config() -> Value {
    json!({"monitoring": {"dcgm": false}})
}

/// `{"global": ..., "gpu": ...}` before any hook ran.
/// `nodes`: what Deckhouse's discovery counts of the cluster's Nodes.
pub fn initial(
    chart: &Path,
    images: &ImagesFile,
    kubernetes_version: &str,
    ca_pem: &str,
    nodes: &NodeCounts,
) -> anyhow::Result<Value> {
    let config_schema = read_yaml(&chart.join("openapi/config-values.yaml"))?;
    let values_schema = read_yaml(&chart.join("openapi/values.yaml"))?;
    let mut module = module_config();
    apply_defaults(&config_schema, &mut module);
    apply_defaults(&values_schema, &mut module);
    let dockercfg = base64::engine::general_purpose::STANDARD.encode(br#"{"auths":{}}"#);
    Ok(json!({
        "global": {
            "enabledModules": ["gpu"],
            "clusterIsBootstrapped": true,
            "discovery": {
                "clusterControlPlaneIsHighlyAvailable": false,
                "clusterMasterCount": nodes.masters,
                "clusterDomain": "cluster.local",
                "d8SpecificNodeCountByRole": nodes.roles,
                "kubernetesVersion": kubernetes_version.trim_start_matches('v'),
                "prometheusScrapeInterval": 30,
                "apiVersions": [],
            },
            "modules": {"placement": {}},
            "internal": {"modules": {"kubeRBACProxyCA": {"cert": ca_pem}}},
            "modulesImages": {
                "registry": {"base": images.registry, "dockercfg": dockercfg},
                "digests": images.digests,
            },
        },
        "gpu": module,
    }))
}

fn read_yaml(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    serde_yaml::from_str(&text).with_context(|| format!("parse {}", path.display()))
}

/// What Deckhouse's discovery counts of the Nodes: control plane nodes
/// (`global.discovery.clusterMasterCount`; none where the control plane is not a node, as here and
/// in managed clusters) and the nodes of each role label `node-role.deckhouse.io/<role>`
/// (`global.discovery.d8SpecificNodeCountByRole`).
#[derive(Debug, Default, PartialEq)]
pub struct NodeCounts {
    pub masters: u64,
    pub roles: BTreeMap<String, u64>,
}

impl NodeCounts {
    pub fn of<'a>(labels: impl IntoIterator<Item = &'a BTreeMap<String, String>>) -> Self {
        let mut counts = NodeCounts::default();
        for node_labels in labels {
            if node_labels.contains_key("node-role.kubernetes.io/control-plane") {
                counts.masters += 1;
            }
            for key in node_labels.keys() {
                if let Some(role) = key.strip_prefix("node-role.deckhouse.io/") {
                    *counts.roles.entry(role.to_owned()).or_insert(0) += 1;
                }
            }
        }
        counts
    }
}

/// Fills absent properties that have a `default`, depth first, as addon-operator does before it
/// validates and renders (a property absent and without a default stays absent).
pub fn apply_defaults(schema: &Value, value: &mut Value) {
    if let (Some(properties), Some(object)) = (
        schema.get("properties").and_then(Value::as_object),
        value.as_object_mut(),
    ) {
        for (name, property) in properties {
            if !object.contains_key(name)
                && let Some(default) = property.get("default")
            {
                object.insert(name.clone(), default.clone());
            }
            if let Some(child) = object.get_mut(name) {
                apply_defaults(property, child);
            }
        }
    }
    if let (Some(items), Some(array)) = (schema.get("items"), value.as_array_mut()) {
        for item in array {
            apply_defaults(items, item);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_are_counted_by_control_plane_and_deckhouse_role_labels() {
        let system: BTreeMap<String, String> = [
            ("node-role.deckhouse.io/system".to_owned(), String::new()),
            ("kubernetes.io/os".to_owned(), "linux".to_owned()),
        ]
        .into();
        let gpu: BTreeMap<String, String> = [
            ("node-role.deckhouse.io/system".to_owned(), String::new()),
            ("node-role.kubernetes.io/control-plane".to_owned(), String::new()),
        ]
        .into();
        let none = BTreeMap::new();
        assert_eq!(
            NodeCounts::of([&system, &gpu, &none]),
            NodeCounts {
                masters: 1,
                roles: BTreeMap::from([("system".to_owned(), 2)])
            }
        );
    }

    #[test]
    fn defaults_fill_absent_properties_depth_first_and_keep_settings() {
        let schema = json!({"properties": {
            "logLevel": {"default": "Info"},
            "monitoring": {"default": {}, "properties": {"dcgm": {"default": true}}},
            "highAvailability": {"type": "boolean"},
            "internal": {"default": {}, "properties": {"bootstrap": {"default": {}, "properties": {
                "validator": {"default": {}, "properties": {"nodes": {"default": []}}}}}}},
        }});
        let mut value = json!({"monitoring": {"dcgm": false}});
        apply_defaults(&schema, &mut value);
        assert_eq!(
            value,
            json!({"logLevel": "Info", "monitoring": {"dcgm": false},
                   "internal": {"bootstrap": {"validator": {"nodes": []}}}})
        );
    }
}
