//! What the claims side tells or asks of its own Node: Warning Events about the node (a corrupt
//! checkpoint, MIG instances it keeps, MPS daemons it started again, a MIG mode change held up)
//! and the pause of the module's DCGM while a MIG mode change waits for the card.
//!
//! DCGM's host engine holds every card open, which keeps a MIG mode change pending on A100/H100.
//! As NVIDIA's MIG manager does with its node labels, the handler labels its Node
//! [`DCGM_PAUSED_LABEL`]; the DCGM and dcgm-exporter DaemonSets select only nodes without it, so the
//! DaemonSet controller removes their Pods, the card is let go, and the retried change applies. The
//! label goes as soon as the prepare that needed it ends (and at every start, after a crash).
//! Needs RBAC `patch` on `nodes`, narrowed to the own Node and to `gpu.deckhouse.io/` labels by the
//! module's ValidatingAdmissionPolicy.

use controller_plumbing::EventPublisher;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

/// The Node label that takes the module's DCGM off the node while a MIG mode change waits.
pub const DCGM_PAUSED_LABEL: &str = "gpu.deckhouse.io/dcgm-paused";
/// Its value: why DCGM is paused.
pub const DCGM_PAUSED_FOR_MIG: &str = "mig-mode-change";

/// Event reasons on the Node.
pub const CHECKPOINT_CORRUPT: &str = "CheckpointCorrupt";
pub const FOREIGN_MIG_INSTANCES: &str = "ForeignMigInstances";
pub const MPS_DAEMON_RESTARTED: &str = "MpsDaemonRestarted";
pub const MIG_MODE_CHANGE_PENDING: &str = "MigModeChangePending";

pub(crate) struct NodeSide {
    client: Client,
    node: String,
    events: EventPublisher,
}

impl NodeSide {
    pub fn new(client: Client, node: &str, events: EventPublisher) -> Self {
        Self {
            client,
            node: node.to_owned(),
            events,
        }
    }

    fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.node.clone()),
            ..ObjectReference::default()
        }
    }

    /// A Warning Event `reason` about the Node.
    pub async fn warn(&self, reason: &str, action: &str, note: String) {
        self.events.warning(&self.reference(), reason, action, note).await;
    }

    /// Takes the module's DCGM off the node (idempotent).
    pub async fn pause_dcgm(&self) {
        self.label_dcgm(Some(DCGM_PAUSED_FOR_MIG)).await;
    }

    /// Lets the module's DCGM back on the node (idempotent).
    pub async fn resume_dcgm(&self) {
        self.label_dcgm(None).await;
    }

    async fn label_dcgm(&self, value: Option<&str>) {
        let nodes = Api::<Node>::all(self.client.clone());
        let patch = json!({"metadata": {"labels": {DCGM_PAUSED_LABEL: value}}});
        match nodes
            .patch(&self.node, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => tracing::info!(node = %self.node, paused = value.is_some(), "DCGM pause label set"),
            Err(error) => {
                tracing::warn!(node = %self.node, %error, paused = value.is_some(), "cannot set the DCGM pause label")
            }
        }
    }
}
