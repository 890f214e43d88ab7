//! Brings the API server to the desired PhysicalGPUs with server-side apply, writing only what
//! differs. A PhysicalGPU of our name that belongs to another node is never taken over.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use controller_plumbing::EventPublisher;
use gpu_api::PhysicalGPU;
use gpu_api::labels;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::FIELD_MANAGER;
use crate::desired::NodeIdentity;

/// What one sync did, by PhysicalGPU name.
#[derive(Debug, Default, PartialEq)]
pub struct SyncReport {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub deleted: Vec<String>,
    /// Desired names held by a PhysicalGPU of another node: left alone, reported as an Event.
    pub foreign: Vec<String>,
}

impl SyncReport {
    pub fn wrote_nothing(&self) -> bool {
        self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }
}

pub struct InventoryWriter {
    gpus: Api<PhysicalGPU>,
    node: NodeIdentity,
    events: EventPublisher,
    writes: Arc<AtomicU64>,
}

impl InventoryWriter {
    pub fn new(gpus: Api<PhysicalGPU>, node: NodeIdentity, events: EventPublisher) -> Self {
        Self {
            gpus,
            node,
            events,
            writes: Arc::default(),
        }
    }

    /// Write requests made so far (the steady-state goal is that this stops moving).
    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }

    /// `stored` is this node's PhysicalGPUs as the watch cache sees them.
    pub async fn sync(&self, desired: &[PhysicalGPU], stored: &[Arc<PhysicalGPU>]) -> anyhow::Result<SyncReport> {
        let mut report = SyncReport::default();
        for want in desired {
            let name = want.metadata.name.clone().expect("desired objects are named");
            let have = match stored.iter().find(|s| s.metadata.name.as_deref() == Some(&name)) {
                Some(have) => Some(have.as_ref().clone()),
                // Not in our cache: it may be another node's, or our own write not yet seen.
                None => self.gpus.get_opt(&name).await?,
            };
            if let Some(have) = &have
                && let Some(owner) = foreign_owner(have, &self.node.name)
            {
                self.report_foreign(&name, &owner).await;
                report.foreign.push(name);
                continue;
            }
            let (meta_differs, status_differs) = match &have {
                None => (true, true),
                Some(have) => (metadata_differs(have, want), status_differs(have, want)),
            };
            if meta_differs {
                self.apply_metadata(&name, want).await?;
            }
            if status_differs {
                self.apply_status(&name, want).await?;
            }
            match (&have, meta_differs || status_differs) {
                (None, _) => report.created.push(name),
                (Some(_), true) => report.updated.push(name),
                (Some(_), false) => {}
            }
        }
        for have in stored {
            let name = have.metadata.name.clone().unwrap_or_default();
            let ours = have.labels().get(labels::NODE) == Some(&self.node.name);
            let wanted = desired.iter().any(|d| d.metadata.name.as_deref() == Some(&name));
            if ours && !wanted {
                self.delete(&name, have.metadata.uid.clone()).await?;
                report.deleted.push(name);
            }
        }
        Ok(report)
    }

    async fn apply_metadata(&self, name: &str, want: &PhysicalGPU) -> anyhow::Result<()> {
        let patch = json!({
            "apiVersion": "gpu.deckhouse.io/v1alpha1",
            "kind": "PhysicalGPU",
            "metadata": {"name": name, "labels": want.metadata.labels, "ownerReferences": want.metadata.owner_references},
            "spec": {},
        });
        self.count();
        self.gpus.patch(name, &apply_params(), &Patch::Apply(&patch)).await?;
        Ok(())
    }

    async fn apply_status(&self, name: &str, want: &PhysicalGPU) -> anyhow::Result<()> {
        let patch = json!({
            "apiVersion": "gpu.deckhouse.io/v1alpha1",
            "kind": "PhysicalGPU",
            "metadata": {"name": name},
            "status": want.status,
        });
        self.count();
        self.gpus
            .patch_status(name, &apply_params(), &Patch::Apply(&patch))
            .await?;
        Ok(())
    }

    async fn delete(&self, name: &str, uid: Option<String>) -> anyhow::Result<()> {
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid,
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.count();
        match self.gpus.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    async fn report_foreign(&self, name: &str, owner: &str) {
        tracing::error!(
            physicalgpu = name,
            owner,
            "a PhysicalGPU with this node's name belongs to another node; not taking it over"
        );
        let node = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(self.node.name.clone()),
            uid: Some(self.node.uid.clone()),
            ..ObjectReference::default()
        };
        let note =
            format!("PhysicalGPU {name} belongs to node {owner}; this node's GPU is not published under that name");
        self.events
            .warning(&node, "PhysicalGPUNameTaken", "Inventory", note)
            .await;
    }

    fn count(&self) {
        self.writes.fetch_add(1, Ordering::Relaxed);
    }
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

/// The node another PhysicalGPU belongs to, if it is not ours.
fn foreign_owner(have: &PhysicalGPU, node: &str) -> Option<String> {
    let by_label = have.labels().get(labels::NODE).cloned();
    let by_status = have
        .status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|n| n.node_name.clone());
    by_label.or(by_status).filter(|owner| owner != node)
}

/// True when a label or the Node owner reference we set is missing or different.
pub fn metadata_differs(have: &PhysicalGPU, want: &PhysicalGPU) -> bool {
    let labels_match = want.labels().iter().all(|(k, v)| have.labels().get(k) == Some(v));
    let owners = have.metadata.owner_references.clone().unwrap_or_default();
    let owners_match = want
        .metadata
        .owner_references
        .iter()
        .flatten()
        .all(|o| owners.iter().any(|h| h.uid == o.uid && h.kind == o.kind));
    !(labels_match && owners_match)
}

/// True when a status field the agent owns (node, PCI, driver binding) differs.
pub fn status_differs(have: &PhysicalGPU, want: &PhysicalGPU) -> bool {
    let (Some(have), Some(want)) = (&have.status, &want.status) else {
        return have.status.is_none() != want.status.is_none() || want.status.is_some();
    };
    let driver = |s: &gpu_api::PhysicalGPUStatus| s.current_state.as_ref().and_then(|c| c.driver_type);
    have.node_info != want.node_info || have.pci_info != want.pci_info || driver(have) != driver(want)
}
