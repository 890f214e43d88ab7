//! Writing and removing the metadata files and their CDI specs (see the crate docs for the layout).
//! Each file is written to a temporary name and renamed, so a reader never sees half of one.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::resource::v1::DeviceAttribute;
use serde_json::{Value, json};

/// The claim annotation that names the Pod's claim of a template-made claim (Kubernetes 1.36+).
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

const API_VERSION: &str = "metadata.resource.k8s.io/v1alpha1";
const CONTAINER_DIR: &str = "/var/run/kubernetes.io/dra-device-attributes";
const CDI_VERSION: &str = "0.5.0";

/// The claim the metadata describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimIdentity {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// `resource.kubernetes.io/pod-claim-name` of a claim made from a template.
    pub pod_claim_name: Option<String>,
}

/// One prepared device of the claim, with the attributes the workload may read.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataDevice {
    /// The request (`<req>` or `<req>/<sub>`) it was allocated for.
    pub request: String,
    pub pool: String,
    pub device: String,
    /// Qualified attribute name -> value, as in a ResourceSlice.
    pub attributes: BTreeMap<String, DeviceAttribute>,
}

/// Writes the metadata of one driver below its plugin and CDI directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMetadataWriter {
    pub driver: String,
    pub plugin_dir: PathBuf,
    pub cdi_dir: PathBuf,
}

impl DeviceMetadataWriter {
    /// Writes one file and one CDI spec per request of `devices`; returns the CDI device id of each
    /// request (by its base name), to be added to the first device of that request.
    pub fn write(&self, claim: &ClaimIdentity, devices: &[MetadataDevice]) -> io::Result<BTreeMap<String, String>> {
        let mut by_request: BTreeMap<&str, Vec<&MetadataDevice>> = BTreeMap::new();
        for device in devices {
            by_request.entry(device.request.as_str()).or_default().push(device);
        }
        let mut ids = BTreeMap::new();
        for (request, devices) in by_request {
            let base = request.split('/').next().unwrap_or(request);
            let file = self.metadata_path(&claim.namespace, &claim.name, base);
            let document = self.document(claim, request, &devices);
            write_atomically(&file, format!("{document}\n").as_bytes())?;
            let device_name = format!("{}_{base}", claim.uid);
            let spec = json!({
                "cdiVersion": CDI_VERSION,
                "kind": format!("{}/metadata", self.driver),
                "devices": [{
                    "name": device_name,
                    "containerEdits": {"mounts": [{
                        "hostPath": file.display().to_string(),
                        "containerPath": self.container_path(claim, base),
                        "options": ["ro", "bind"],
                    }]},
                }],
            });
            let text = serde_json::to_vec_pretty(&spec).map_err(io::Error::other)?;
            write_atomically(&self.cdi_spec_path(&claim.uid, base), &text)?;
            ids.insert(base.to_owned(), format!("{}/metadata={device_name}", self.driver));
        }
        Ok(ids)
    }

    /// Removes everything written for the claim; nothing written is fine.
    pub fn remove(&self, namespace: &str, name: &str, uid: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(self.claim_dir(namespace, name)) {
            Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
            _ => {}
        }
        let prefix = format!("{}_metadata_{uid}_", self.driver);
        let entries = match std::fs::read_dir(&self.cdi_dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(error) => return Err(error),
        };
        for entry in entries {
            let path = entry?.path();
            let ours = path
                .file_name()
                .map(|n| n.to_string_lossy())
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json"));
            if ours {
                match std::fs::remove_file(&path) {
                    Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(error),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The `DeviceMetadata` of one request.
    fn document(&self, claim: &ClaimIdentity, request: &str, devices: &[&MetadataDevice]) -> Value {
        let devices: Vec<Value> = devices
            .iter()
            .map(|d| json!({"driver": self.driver, "pool": d.pool, "name": d.device, "attributes": d.attributes}))
            .collect();
        let mut document = json!({
            "apiVersion": API_VERSION,
            "kind": "DeviceMetadata",
            "metadata": {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid, "generation": 1},
            "requests": [{"name": request, "devices": devices}],
        });
        if let Some(pod_claim) = &claim.pod_claim_name {
            document["podClaimName"] = json!(pod_claim);
        }
        document
    }

    fn claim_dir(&self, namespace: &str, name: &str) -> PathBuf {
        self.plugin_dir
            .join("dra-device-metadata")
            .join(format!("{namespace}_{name}"))
    }

    /// The host path of a request's file.
    pub fn metadata_path(&self, namespace: &str, name: &str, request: &str) -> PathBuf {
        self.claim_dir(namespace, name).join(request).join("metadata.json")
    }

    /// The CDI spec of a request.
    pub fn cdi_spec_path(&self, uid: &str, request: &str) -> PathBuf {
        self.cdi_dir
            .join(format!("{}_metadata_{uid}_{request}.json", self.driver))
    }

    /// Where the container finds a request's file.
    pub fn container_path(&self, claim: &ClaimIdentity, request: &str) -> String {
        let file = format!("{}-metadata.json", self.driver);
        match claim.pod_claim_name.as_deref().filter(|n| !n.is_empty()) {
            Some(pod_claim) => format!("{CONTAINER_DIR}/resourceclaimtemplates/{pod_claim}/{request}/{file}"),
            None => format!("{CONTAINER_DIR}/resourceclaims/{}/{request}/{file}", claim.name),
        }
    }
}

fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    durable_file::write_atomically(path, contents)
        .map_err(|error| io::Error::new(error.source.kind(), error.to_string()))
}

#[cfg(test)]
mod tests;
