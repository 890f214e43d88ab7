//! The static Pod that runs a card's MPS control daemon apart from gpu-handler's container, so a
//! restart of that container, a deletion of its Pod or a change of its image leaves the daemon and
//! its clients running (issue 33, deliverable 3; the design is in docs/ADMIN_GUIDE.md, "The design
//! that removes it"). Pure: what the manifest says, from what the handler knows; writing it into the
//! kubelet's static Pod directory and removing it are the caller's.
//!
//! - The kubelet runs a manifest found in its `staticPodPath` as a Pod of the node, restarts its
//!   container when it fails (`restartPolicy: OnFailure`: a daemon that took `quit` exits 0 and stays
//!   down until its manifest goes) and stops it when the file goes; the API server shows it as a mirror
//!   Pod named `<name>-<node>`.
//! - Each start's manifest carries an annotation of its own (`instance`): the kubelet derives a static
//!   Pod's UID from its content, and a card's next daemon must be a new Pod, never the one being
//!   stopped, whose binds are of directories removed since.
//! - The daemon runs in the foreground (`nvidia-cuda-mps-control -f`), so the kubelet, not a fork,
//!   owns it; through `driver-tool`, the image's launcher that runs a driver tool in a chroot into the
//!   driver root (the host's loader and libc with the host's binary).
//! - Its environment is the one `mps_daemon` gives a daemon today: `CUDA_VISIBLE_DEVICES` the card's
//!   UUID, pipe and log directories the card's; the card's shared-memory directory (the tmpfs the
//!   handler mounted) is its `/dev/shm`, where it meets its clients, so no `mps-namespace` launcher.
//! - Mirror Pods may not use a ServiceAccount, Secret or ConfigMap: it uses none.
//! - The pipe and log directories are at their host paths in the container too, as in gpu-handler's
//!   (whose paths are the host's): `driver-tool` binds each into the driver root at the same path, and
//!   where the driver root is the host's `/` that is the directory itself, so the bind is left out.
//! - Host network: the daemon needs none, and a node whose Pod network is not up yet still runs it.
//! - The card is named by `CUDA_VISIBLE_DEVICES` alone: the container is privileged (see below), so
//!   it sees the host's device nodes, as the daemon in gpu-handler's container does today.

use std::path::Path;

use serde_json::{Value, json};

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
    /// Tells this start's Pod from an earlier one of the card (e.g. the time it was written).
    pub instance: &'a str,
    /// The driver root on the host.
    pub driver_root: &'a Path,
    /// The card's pipe, log and shared-memory directories on the host (gpu-handler's paths, which the
    /// chart makes the host's).
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
        json!({"name": "pipe", "mountPath": pod.pipe_dir.display().to_string()}),
        json!({"name": "log", "mountPath": pod.log_dir.display().to_string()}),
        json!({"name": "shm", "mountPath": "/dev/shm"}),
    ];
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(pod.card),
            "namespace": pod.namespace,
            "labels": {"app": "gpu-mps", "gpu.deckhouse.io/card": pod.card.replace([':', '.'], "-")},
            "annotations": {"gpu.deckhouse.io/card-uuid": pod.uuid, "gpu.deckhouse.io/instance": pod.instance},
        },
        "spec": {
            "restartPolicy": "OnFailure",
            "priorityClassName": "system-node-critical",
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "hostNetwork": true,
            // The image's user is an unprivileged one (as gpu-handler's Pod, this one runs as root):
            // privileged or not, a non-root process may not make the mount namespace driver-tool needs.
            "securityContext": {"runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": false},
            "containers": [{
                "name": "mps-control",
                "image": pod.image,
                "imagePullPolicy": "IfNotPresent",
                "command": [MPS_CONTROL_IN_IMAGE, "-f"],
                "env": [
                    {"name": "CUDA_VISIBLE_DEVICES", "value": pod.uuid},
                    {"name": "CUDA_MPS_PIPE_DIRECTORY", "value": pod.pipe_dir.display().to_string()},
                    {"name": "CUDA_MPS_LOG_DIRECTORY", "value": pod.log_dir.display().to_string()},
                    {"name": "DRIVER_ROOT_CTR_PATH", "value": DRIVER_ROOT_IN_POD},
                ],
                // driver-tool makes a mount namespace of its own and chroots, and the server the daemon
                // starts opens the card's device node: privileged, as gpu-handler (a device node bound
                // by hostPath stays closed to an unprivileged container by the device cgroup).
                "securityContext": {"privileged": true, "readOnlyRootFilesystem": true},
                "volumeMounts": mounts,
            }],
            "volumes": volumes,
        },
    })
}

#[cfg(test)]
#[path = "mps_static_pod_tests.rs"]
mod tests;
