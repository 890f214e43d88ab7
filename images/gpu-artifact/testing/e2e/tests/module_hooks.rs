//! The module's hooks binary run as addon-operator runs it (`hook run <index>` with the protocol's
//! files), against the real API server: CRDs applied, and the server's version and DRA gates found.

mod support;

use std::path::Path;
use std::process::Command;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use serde_json::Value;
use support::components::repo_root;
use testbed::{TestCluster, component_binary};

const ENSURE_CRDS: &str = "0";
const FEATURE_DISCOVERY: &str = "1";

/// Runs hook `index` with the admin kubeconfig; returns its values patch.
fn run_hook(index: &str, kubeconfig: &Path) -> Value {
    let binary = component_binary("gpu-module-hooks").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let patch = dir.path().join("values-patch.json");
    let context = dir.path().join("context.json");
    std::fs::write(&context, r#"[{"binding": "beforeHelm", "snapshots": {}}]"#).unwrap();
    let out = Command::new(binary)
        .args(["hook", "run", index])
        .env("KUBECONFIG", kubeconfig)
        .env("GPU_MODULE_CRDS_DIR", repo_root().join("crds"))
        .env("BINDING_CONTEXT_PATH", &context)
        .env("VALUES_JSON_PATCH_PATH", &patch)
        .env("KUBERNETES_PATCH_PATH", dir.path().join("kubernetes-patch.json"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hook {index}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&patch).unwrap_or_else(|_| "[]".into())).unwrap()
}

#[tokio::test]
async fn ensure_crds_applies_the_module_crds() {
    let cluster = TestCluster::get().await.unwrap();
    let patch = run_hook(ENSURE_CRDS, cluster.kubeconfig_path());
    assert_eq!(patch, serde_json::json!([]), "ensure-crds changes no values");
    let crd = Api::<CustomResourceDefinition>::all(cluster.client())
        .get("physicalgpus.gpu.deckhouse.io")
        .await
        .unwrap();
    let managers: Vec<String> = crd
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| f.manager)
        .collect();
    assert!(managers.contains(&"gpu-module-hooks".to_owned()), "{managers:?}");
}

#[tokio::test]
async fn feature_discovery_finds_the_server_version_and_its_dra_gates() {
    let cluster = TestCluster::get().await.unwrap();
    let patch = run_hook(FEATURE_DISCOVERY, cluster.kubeconfig_path());
    let op = &patch[0];
    assert_eq!(
        (op["op"].as_str(), op["path"].as_str()),
        (Some("add"), Some("/gpu/internal/kubernetes"))
    );
    let version = op["value"]["serverVersion"].as_str().unwrap();
    let minor = cluster.server_minor().await.unwrap();
    assert!(
        version.starts_with(&format!("1.{minor}.")),
        "{version} vs minor {minor}"
    );
    let gates: Vec<&str> = op["value"]["featureGates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The test bed enables these on every version it runs (see tools/testbed/cluster-up.sh).
    for gate in ["DRAConsumableCapacity", "DRAPartitionableDevices"] {
        assert!(gates.contains(&gate), "{gate} missing from {gates:?}");
    }
    assert!(gates.iter().all(|g| g.starts_with("DRA")), "{gates:?}");
}
