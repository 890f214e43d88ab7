//! The per-claim CDI spec: one CDI device per allocated device, named
//! `<claimUID>-<deviceName>`, carrying the device nodes and the environment a
//! container needs for that card or MIG device.
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

/// What one CDI device exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CdiDevice {
    /// The published device name.
    pub device: String,
    /// The minor of the card (the MIG device's parent).
    pub card_minor: u32,
    /// The card UUID or the MIG device UUID.
    pub visible_uuid: String,
    /// Capability minors granting the GPU instance and the compute instance.
    pub mig_capability_minors: Option<(u32, u32)>,
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

/// The spec document for the claim.
pub(crate) fn spec(claim_uid: &str, devices: &[CdiDevice]) -> Value {
    let devices: Vec<Value> = devices
        .iter()
        .map(|device| {
            let mut nodes = vec![format!("/dev/nvidia{}", device.card_minor)];
            nodes.extend(CONTROL_NODES.iter().map(|node| node.to_string()));
            if let Some((gi, ci)) = device.mig_capability_minors {
                nodes.push(format!("/dev/nvidia-caps/nvidia-cap{gi}"));
                nodes.push(format!("/dev/nvidia-caps/nvidia-cap{ci}"));
            }
            let nodes: Vec<Value> = nodes.into_iter().map(|path| json!({ "path": path })).collect();
            json!({
                "name": cdi_name(claim_uid, &device.device),
                "containerEdits": {
                    "env": [format!("NVIDIA_VISIBLE_DEVICES={}", device.visible_uuid)],
                    "deviceNodes": nodes,
                },
            })
        })
        .collect();
    json!({ "cdiVersion": CDI_VERSION, "kind": CDI_KIND, "devices": devices })
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
                card_minor: 1,
                visible_uuid: "MIG-abc".into(),
                mig_capability_minors: Some((12, 13)),
            }],
        );
        assert_eq!(
            spec,
            json!({
                "cdiVersion": "0.6.0",
                "kind": "gpu.deckhouse.io/claim",
                "devices": [{
                    "name": "3f0e-gpu0-mig-2g12gb-2",
                    "containerEdits": {
                        "env": ["NVIDIA_VISIBLE_DEVICES=MIG-abc"],
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
