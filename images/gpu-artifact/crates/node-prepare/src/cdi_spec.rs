//! The per-claim CDI spec: one CDI device per allocated device, named
//! `<claimUID>-<deviceName>`, carrying the device nodes, the environment and
//! the mounts a container needs for that card, MIG device, MPS share or card
//! on vfio-pci.
//!
//! cdiVersion 0.6.0 is the lowest that accepts what we use: a kind with dots
//! (`gpu.deckhouse.io/claim`, 0.6.0) and names that may start with a digit
//! (claim UIDs, 0.5.0).

use serde_json::{Value, json};

use crate::config::CDI_KIND;

pub(crate) const CDI_VERSION: &str = "0.6.0";

/// The longest name segment CDI accepts.
const MAX_NAME_LEN: usize = 63;

/// The nodes every CUDA container needs besides its card.
const CONTROL_NODES: [&str; 3] = ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"];

/// Where a container finds its card's MPS pipes: the MPS default (what a client uses when the
/// variable is unset). The daemon's log directory is never given to a container: clients do not
/// write it, and a tenant must not read or fill another tenant's log.
pub(crate) const MPS_PIPE_IN_CONTAINER: &str = "/tmp/nvidia-mps";

/// Where a container finds a VFIO claim's QEMU hook payload: `<dir>/<claimUID>.json`.
pub const VFIO_PAYLOAD_CONTAINER_DIR: &str = "/var/run/gpu.deckhouse.io/vfio";

/// What one CDI device (or the whole spec) gives a container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ContainerEdits {
    pub env: Vec<String>,
    pub device_nodes: Vec<String>,
    /// Bind mounts: host path, container path, read-only.
    pub mounts: Vec<(String, String, bool)>,
    /// createContainer hooks the runtime runs.
    pub hooks: Vec<CdiHook>,
}

/// A createContainer hook: the binary on the host and its full argv.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CdiHook {
    pub path: String,
    pub args: Vec<String>,
}

/// One CDI device: the published device name and its edits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CdiDevice {
    pub device: String,
    pub edits: ContainerEdits,
}

impl ContainerEdits {
    /// `NVIDIA_VISIBLE_DEVICES` for every container of a claim: the UUIDs of its cards and MIG
    /// devices, or `void` when it has none (cards on vfio-pci), which tells an NVIDIA runtime to
    /// add nothing. It is the claim's, not a device's: the runtime applies CDI edits in turn and an
    /// `env` entry replaces an earlier one of the same name (tags.cncf.io/container-device-interface
    /// `ContainerEdits.Apply`), so a variable set per device would name only the container's last
    /// device. A container that uses only some requests of a claim sees all the claim's UUIDs here
    /// (their device nodes stay out of it); one with several claims sees the last claim's.
    pub fn visible_devices(uuids: &[String]) -> Self {
        let visible = if uuids.is_empty() {
            "void".to_owned()
        } else {
            uuids.join(",")
        };
        ContainerEdits {
            env: vec![format!("NVIDIA_VISIBLE_DEVICES={visible}")],
            ..ContainerEdits::default()
        }
    }

    /// A card (minor `card_minor`) or one of its MIG devices; a MIG device also needs the
    /// capability nodes of its GPU and compute instance.
    pub fn gpu(card_minor: u32, mig_capability_minors: Option<(u32, u32)>) -> Self {
        let mut device_nodes = vec![format!("/dev/nvidia{card_minor}")];
        device_nodes.extend(CONTROL_NODES.iter().map(|node| node.to_string()));
        if let Some((gi, ci)) = mig_capability_minors {
            device_nodes.push(format!("/dev/nvidia-caps/nvidia-cap{gi}"));
            device_nodes.push(format!("/dev/nvidia-caps/nvidia-cap{ci}"));
        }
        ContainerEdits {
            device_nodes,
            ..ContainerEdits::default()
        }
    }

    /// An MPS client of the card's daemon, whose pipe directory is on the host at `pipe_dir`, limited
    /// to `active_thread_percentage` of the card; with `shm_dir`, the daemon's `/dev/shm` (where
    /// daemon and clients meet when the daemon runs in a mount namespace of its own).
    pub fn with_mps(mut self, pipe_dir: &str, shm_dir: Option<&str>, active_thread_percentage: u32) -> Self {
        self.env.extend([
            format!("CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE_IN_CONTAINER}"),
            format!("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={active_thread_percentage}"),
        ]);
        self.mounts
            .push((pipe_dir.to_owned(), MPS_PIPE_IN_CONTAINER.to_owned(), false));
        if let Some(shm_dir) = shm_dir {
            self.mounts.push((shm_dir.to_owned(), "/dev/shm".to_owned(), false));
        }
        self
    }

    /// A card on vfio-pci: its IOMMU group's node (and no NVIDIA device, see [`Self::visible_devices`]).
    pub fn vfio(iommu_group: u32) -> Self {
        ContainerEdits {
            device_nodes: vec![format!("/dev/vfio/{iommu_group}")],
            ..ContainerEdits::default()
        }
    }

    /// What every container of a VFIO claim needs once: the VFIO container
    /// node and the claim's payload (read-only).
    pub fn vfio_claim(claim_uid: &str, payload_on_host: &str) -> Self {
        ContainerEdits {
            env: Vec::new(),
            device_nodes: vec!["/dev/vfio/vfio".to_owned()],
            mounts: vec![(
                payload_on_host.to_owned(),
                format!("{VFIO_PAYLOAD_CONTAINER_DIR}/{claim_uid}.json"),
                true,
            )],
            ..ContainerEdits::default()
        }
    }

    /// Adds what `other` gives (a claim's VFIO payload and its driver files, say).
    pub fn merge(&mut self, other: ContainerEdits) {
        self.env.extend(other.env);
        self.device_nodes.extend(other.device_nodes);
        self.mounts.extend(other.mounts);
        self.hooks.extend(other.hooks);
    }

    fn to_json(&self) -> Value {
        let mut edits = serde_json::Map::new();
        if !self.env.is_empty() {
            edits.insert("env".into(), json!(self.env));
        }
        if !self.device_nodes.is_empty() {
            let nodes: Vec<Value> = self.device_nodes.iter().map(|path| json!({ "path": path })).collect();
            edits.insert("deviceNodes".into(), Value::Array(nodes));
        }
        if !self.mounts.is_empty() {
            let mounts: Vec<Value> = self
                .mounts
                .iter()
                .map(|(host, container, read_only)| {
                    let access = if *read_only { "ro" } else { "rw" };
                    json!({
                        "hostPath": host,
                        "containerPath": container,
                        "options": [access, "nosuid", "nodev", "bind"],
                    })
                })
                .collect();
            edits.insert("mounts".into(), Value::Array(mounts));
        }
        if !self.hooks.is_empty() {
            let hooks: Vec<Value> = self
                .hooks
                .iter()
                .map(|hook| json!({"hookName": "createContainer", "path": hook.path, "args": hook.args}))
                .collect();
            edits.insert("hooks".into(), Value::Array(hooks));
        }
        Value::Object(edits)
    }
}

/// The CDI device name of `device` in the claim's spec.
pub(crate) fn cdi_name(claim_uid: &str, device: &str) -> String {
    format!("{claim_uid}-{device}")
}

/// The fully qualified id the kubelet hands to the runtime.
pub(crate) fn cdi_device_id(claim_uid: &str, device: &str) -> String {
    format!("{CDI_KIND}={}", cdi_name(claim_uid, device))
}

/// Checks that the CDI name of `device` is valid; the reason otherwise.
pub(crate) fn check_name(claim_uid: &str, device: &str) -> Result<(), String> {
    let name = cdi_name(claim_uid, device);
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "CDI device name {name} is longer than {MAX_NAME_LEN} characters"
        ));
    }
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        return Err(format!(
            "CDI device name {name} has characters other than alphanumerics and -_."
        ));
    }
    Ok(())
}

/// The spec document for the claim; `claim_edits` apply whenever any of its devices is injected.
pub(crate) fn spec(claim_uid: &str, devices: &[CdiDevice], claim_edits: Option<&ContainerEdits>) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|device| {
            json!({
                "name": cdi_name(claim_uid, &device.device),
                "containerEdits": device.edits.to_json(),
            })
        })
        .collect();
    let mut spec = serde_json::Map::new();
    spec.insert("cdiVersion".into(), json!(CDI_VERSION));
    spec.insert("kind".into(), json!(CDI_KIND));
    spec.insert("devices".into(), Value::Array(devices));
    if let Some(edits) = claim_edits {
        spec.insert("containerEdits".into(), edits.to_json());
    }
    Value::Object(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mig_device_gets_its_parent_card_and_both_capability_nodes() {
        let spec = spec(
            "3f0e",
            &[CdiDevice {
                device: "gpu0-mig-2g12gb-2".into(),
                edits: ContainerEdits::gpu(1, Some((12, 13))),
            }],
            Some(&ContainerEdits::visible_devices(&["MIG-abc".into()])),
        );
        assert_eq!(
            spec,
            json!({
                "cdiVersion": "0.6.0",
                "kind": "gpu.deckhouse.io/claim",
                "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=MIG-abc"]},
                "devices": [{
                    "name": "3f0e-gpu0-mig-2g12gb-2",
                    "containerEdits": {
                        "deviceNodes": [
                            {"path": "/dev/nvidia1"},
                            {"path": "/dev/nvidiactl"},
                            {"path": "/dev/nvidia-uvm"},
                            {"path": "/dev/nvidia-uvm-tools"},
                            {"path": "/dev/nvidia-caps/nvidia-cap12"},
                            {"path": "/dev/nvidia-caps/nvidia-cap13"},
                        ],
                    },
                }],
            })
        );
        assert_eq!(
            cdi_device_id("3f0e", "gpu0-mig-2g12gb-2"),
            "gpu.deckhouse.io/claim=3f0e-gpu0-mig-2g12gb-2"
        );
    }

    #[test]
    fn names_over_the_cdi_limit_are_refused() {
        let uid = "0f3a8c2e-6a51-4c3b-9d1e-2b7a4f6c8e90";
        assert!(check_name(uid, "gpu0-mig-1g10gb-me-6").is_ok());
        let error = check_name(uid, "gpu0-mig-a-very-long-profile-name-x").unwrap_err();
        assert!(error.contains("longer than 63"), "{error}");
        assert!(check_name(uid, "gpu0/x").is_err());
    }
}
