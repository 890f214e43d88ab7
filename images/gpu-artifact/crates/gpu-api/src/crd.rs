//! The CRD YAML in the module's `crds/` directory, generated from the Rust types.
//!
//! `cargo test -p gpu-api` fails when a file there differs from what the types generate;
//! `make crds` (UPDATE_CRDS=1) rewrites them. Russian descriptions live beside them in
//! `doc-ru-<plural>.yaml`, and a test checks they cover every described field.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{GPUClass, PhysicalGPU};

/// Every CRD the module installs, with the file it lives in.
pub fn definitions() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![
        ("physicalgpus.yaml", PhysicalGPU::crd()),
        ("gpuclasses.yaml", GPUClass::crd()),
    ]
}

/// The exact text of a CRD file.
pub fn render(crd: &CustomResourceDefinition) -> String {
    // Safe: the input is our own generated type (not outside input), and a CRD is plain data
    // (strings, maps, numbers) that YAML always represents; `make crds` is the only caller.
    #[allow(clippy::expect_used)]
    let body = serde_yaml::to_string(crd).expect("a CRD serialises to YAML");
    format!(
        "# Generated from the Rust types in images/gpu-artifact/crates/gpu-api; do not edit.\n\
         # Regenerate with `make crds`.\n{body}"
    )
}

/// Paths (`status.pciInfo.address`) of every property that carries a description in `schema`.
pub fn described_paths(schema: &serde_json::Value) -> Vec<String> {
    let mut paths = vec![];
    collect(schema, "", &mut paths);
    paths.sort();
    paths
}

fn collect(schema: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    if let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) {
        for (name, property) in properties {
            let child = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            if property.get("description").is_some() {
                out.push(child.clone());
            }
            collect(property, &child, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect(items, &format!("{path}[]"), out);
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn crds_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../../crds")
    }

    #[test]
    fn crd_files_are_generated_from_the_types() {
        let update = std::env::var("UPDATE_CRDS").is_ok_and(|v| v == "1");
        for (file, crd) in definitions() {
            let path = crds_dir().join(file);
            let expected = render(&crd);
            if update {
                std::fs::write(&path, &expected).expect("write CRD");
                continue;
            }
            let actual = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(actual == expected, "{} is stale: run `make crds`", path.display());
        }
    }

    #[test]
    fn russian_docs_describe_every_field() {
        for (file, crd) in definitions() {
            let path = crds_dir().join(format!("doc-ru-{file}"));
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let ru: serde_json::Value = serde_yaml::from_str(&text).expect("doc-ru is YAML");
            let crd = serde_json::to_value(&crd).unwrap();
            for (index, version) in crd["spec"]["versions"].as_array().unwrap().iter().enumerate() {
                let english = described_paths(&version["schema"]["openAPIV3Schema"]);
                let russian = described_paths(&ru["spec"]["versions"][index]["schema"]["openAPIV3Schema"]);
                let missing: Vec<_> = english.iter().filter(|p| !russian.contains(p)).collect();
                assert!(
                    missing.is_empty(),
                    "{} lacks descriptions for {missing:?}",
                    path.display()
                );
                let extra: Vec<_> = russian.iter().filter(|p| !english.contains(p)).collect();
                assert!(
                    extra.is_empty(),
                    "{} describes fields that do not exist: {extra:?}",
                    path.display()
                );
            }
        }
    }

    #[test]
    fn physical_gpu_is_cluster_scoped_with_status_and_columns() {
        let crd = PhysicalGPU::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("physicalgpus.gpu.deckhouse.io"));
        assert_eq!(crd.spec.scope, "Cluster");
        let labels = crd.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("heritage").map(String::as_str), Some("deckhouse"));
        assert_eq!(labels.get("module").map(String::as_str), Some("gpu"));
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        let columns: Vec<_> = version
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            columns,
            ["Node", "Model", "PCI", "Driver", "DriverReady", "Healthy", "MIG", "Age"]
        );
        let conditions = serde_json::to_value(&version.schema).unwrap()["openAPIV3Schema"]["properties"]["status"]
            ["properties"]["conditions"]
            .clone();
        assert_eq!(
            conditions["x-kubernetes-list-type"], "map",
            "owners of different conditions must not clash"
        );
    }
}
