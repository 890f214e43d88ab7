//! What the node keeps for MPS: a directory per card with a running daemon, with the card's tmpfs.
//! A test that makes MPS shares leaves the node without them once its namespaces are deleted, and
//! one that counts the node's MPS directories starts from that state: test binaries run one after
//! another, and a namespace's deletion (its Pods' ends, their claims' unprepare, the daemon's stop)
//! goes on after the test that deleted it returned.

use real_node::node::RealNode;
use testbed::{Progress, wait_until};

use super::POD_DONE;

/// Where gpu-handler keeps the cards' MPS directories, as the node sees it.
pub const MPS_DIR: &str = "/var/lib/kubelet/plugins/gpu.deckhouse.io/mps";

/// The node's mounts below [`MPS_DIR`]: `(mount point, filesystem type, super options)`.
pub fn mps_mounts(node: &RealNode) -> Vec<(String, String, String)> {
    let out = node
        .exec(&["cat", "/proc/self/mountinfo"])
        .expect("the node's mountinfo");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let separator = fields.iter().position(|f| *f == "-")?;
            let point = fields.get(4)?;
            if !point.starts_with(MPS_DIR) {
                return None;
            }
            let kind = fields.get(separator + 1)?;
            let options = fields.get(separator + 3)?;
            Some((point.to_string(), kind.to_string(), options.to_string()))
        })
        .collect()
}

/// Where the kubelet reads static Pods on the node (Deckhouse's staticPodPath), the MPS daemons' among them.
pub const STATIC_PODS: &str = "/etc/kubernetes/manifests";

/// Waits until no card has an MPS directory, a tmpfs below [`MPS_DIR`] or a daemon's static Pod
/// (`why`: whose shares went).
pub async fn wait_no_mps_left(node: &RealNode, why: &str) {
    wait_until(
        &format!("{why}: the cards' MPS directories and tmpfs gone"),
        POD_DONE,
        || async move {
            let cards = node.files().list(MPS_DIR)?;
            let mounts = mps_mounts(node);
            let mut daemons = node.files().list(STATIC_PODS)?;
            daemons.retain(|m| m.starts_with("gpu-mps-"));
            Ok(
                if cards.is_empty() && mounts.iter().all(|(point, ..)| point == MPS_DIR) && daemons.is_empty() {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{cards:?} {mounts:?} {daemons:?}"))
                },
            )
        },
    )
    .await
    .unwrap();
}
