//! The static Pod that runs a card's MPS control daemon apart from gpu-handler's container, so a
//! restart of that container, a deletion of its Pod or a change of its image leaves the daemon and
//! its clients running (issue 33, deliverable 3; the design is in docs/ADMIN_GUIDE.md, "The design
//! that removes it"). Pure: what the manifest says, from what the handler knows; writing it into the
//! kubelet's static Pod directory and removing it are the caller's.
//!
//! - The kubelet runs a manifest found in its `staticPodPath` as a Pod of the node, restarts its
//!   container when it exits (`restartPolicy: Always`) and stops it when the file goes; the API server
//!   shows it as a mirror Pod named `<name>-<node>`.
//! - The daemon runs in the foreground (`nvidia-cuda-mps-control -f`), so the kubelet, not a fork,
//!   owns it; through `driver-tool`, the image's launcher that runs a driver tool in a chroot into the
//!   driver root (the host's loader and libc with the host's binary).
//! - Its environment is the one `mps_daemon` gives a daemon today: `CUDA_VISIBLE_DEVICES` the card's
//!   UUID, pipe and log directories the card's; the card's shared-memory directory (the tmpfs the
//!   handler mounted) is its `/dev/shm`, where it meets its clients, so no `mps-namespace` launcher.
//! - Mirror Pods may not use a ServiceAccount, Secret or ConfigMap: it uses none.
//! - The card is named by `CUDA_VISIBLE_DEVICES` alone: the container is privileged (see below), so
//!   it sees the host's device nodes, as the daemon in gpu-handler's container does today.

use std::path::Path;

use serde_json::{Value, json};

/// Where the daemon finds the card's directories in its container.
const PIPE_IN_POD: &str = "/mps/pipe";
const LOG_IN_POD: &str = "/mps/log";
/// The driver root in the daemon's container, where `driver-tool` looks for it.
const DRIVER_ROOT_IN_POD: &str = "/driver-root";
/// The image's link to `driver-tool` named for the MPS control tool.
const MPS_CONTROL_IN_IMAGE: &str = "/app/driver-tools/nvidia-cuda-mps-control";

/// What the manifest of one card's daemon is made of.
pub(crate) struct MpsPod<'a> {
    /// The card's PCI address, as the card's MPS directory is named (`0000:18:00.0`).
    pub card: &'a str,
    pub uuid: &'a str,
    /// gpu-handler's own image, by digest: a manifest is never rewritten while the card has shares.
    pub image: &'a str,
    pub namespace: &'a str,
    /// The driver root on the host.
    pub driver_root: &'a Path,
    /// The card's pipe, log and shared-memory directories on the host.
    pub pipe_dir: &'a Path,
    pub log_dir: &'a Path,
    pub shm_dir: &'a Path,
}

/// The Pod's name for `card`: `gpu-mps-` and the PCI address with `:` and `.` as `-` (a DNS label).
pub(crate) fn pod_name(card: &str) -> String {
    format!("gpu-mps-{}", card.replace([':', '.'], "-").to_lowercase())
}

/// The manifest's file name in the static Pod directory.
pub(crate) fn manifest_file(card: &str) -> String {
    format!("{}.json", pod_name(card))
}

fn host_path(name: &str, path: &Path, kind: &str) -> Value {
    json!({"name": name, "hostPath": {"path": path.display().to_string(), "type": kind}})
}

/// The static Pod of `pod`'s card, as JSON (which the kubelet reads as it reads YAML).
pub(crate) fn manifest(pod: &MpsPod<'_>) -> Value {
    let volumes = vec![
        host_path("driver-root", pod.driver_root, "Directory"),
        host_path("pipe", pod.pipe_dir, "Directory"),
        host_path("log", pod.log_dir, "Directory"),
        host_path("shm", pod.shm_dir, "Directory"),
    ];
    let mounts = vec![
        json!({"name": "driver-root", "mountPath": DRIVER_ROOT_IN_POD, "readOnly": true}),
        json!({"name": "pipe", "mountPath": PIPE_IN_POD}),
        json!({"name": "log", "mountPath": LOG_IN_POD}),
        json!({"name": "shm", "mountPath": "/dev/shm"}),
    ];
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(pod.card),
            "namespace": pod.namespace,
            "labels": {"app": "gpu-mps", "gpu.deckhouse.io/card": pod.card.replace([':', '.'], "-")},
            "annotations": {"gpu.deckhouse.io/card-uuid": pod.uuid},
        },
        "spec": {
            "restartPolicy": "Always",
            "priorityClassName": "system-node-critical",
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "containers": [{
                "name": "mps-control",
                "image": pod.image,
                "imagePullPolicy": "IfNotPresent",
                "command": [MPS_CONTROL_IN_IMAGE, "-f"],
                "env": [
                    {"name": "CUDA_VISIBLE_DEVICES", "value": pod.uuid},
                    {"name": "CUDA_MPS_PIPE_DIRECTORY", "value": PIPE_IN_POD},
                    {"name": "CUDA_MPS_LOG_DIRECTORY", "value": LOG_IN_POD},
                    {"name": "DRIVER_ROOT_CTR_PATH", "value": DRIVER_ROOT_IN_POD},
                ],
                // driver-tool makes a mount namespace of its own and chroots, and the server the daemon
                // starts opens the card's device node: privileged, as gpu-handler (a device node bound
                // by hostPath stays closed to an unprivileged container by the device cgroup).
                "securityContext": {"privileged": true},
                "volumeMounts": mounts,
            }],
            "volumes": volumes,
        },
    })
}

#[cfg(test)]
#[path = "mps_static_pod_tests.rs"]
mod tests;
