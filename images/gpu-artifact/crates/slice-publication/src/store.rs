//! The node's slices in the API server: list, server-side apply, delete. Nothing else here talks
//! to the API server about slices.

use anyhow::Context;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};

pub struct SliceStore {
    api: Api<ResourceSlice>,
    node_name: String,
    driver: String,
    field_manager: String,
}

impl SliceStore {
    pub fn new(client: Client, node_name: &str, driver: &str, field_manager: &str) -> Self {
        Self {
            api: Api::all(client),
            node_name: node_name.to_owned(),
            driver: driver.to_owned(),
            field_manager: field_manager.to_owned(),
        }
    }

    /// Every slice of our driver on the node, whatever its pool or generation.
    pub async fn list(&self) -> anyhow::Result<Vec<ResourceSlice>> {
        let params = ListParams::default().fields(&format!("spec.nodeName={}", self.node_name));
        let slices = self
            .api
            .list(&params)
            .await
            .with_context(|| format!("listing the ResourceSlices of node {}", self.node_name))?;
        Ok(slices
            .items
            .into_iter()
            .filter(|s| s.spec.driver == self.driver)
            .collect())
    }

    /// Server-side applies `slice` and returns what the server stored.
    pub async fn apply(&self, slice: &ResourceSlice) -> anyhow::Result<ResourceSlice> {
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        let params = PatchParams::apply(&self.field_manager).force();
        self.api
            .patch(name, &params, &Patch::Apply(slice))
            .await
            .with_context(|| format!("applying ResourceSlice {name}"))
    }

    /// What the server would store for `slice`, without storing it (server-side apply, dry run).
    pub async fn dry_run_apply(&self, slice: &ResourceSlice) -> anyhow::Result<ResourceSlice> {
        let name = slice.metadata.name.as_deref().unwrap_or_default();
        let params = PatchParams::apply(&self.field_manager).force().dry_run();
        self.api
            .patch(name, &params, &Patch::Apply(slice))
            .await
            .with_context(|| format!("dry-run applying ResourceSlice {name}"))
    }

    /// Deletes a slice; one that is already gone counts as deleted.
    pub async fn delete(&self, name: &str) -> anyhow::Result<()> {
        match self.api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(error) => Err(error).with_context(|| format!("deleting stale ResourceSlice {name}")),
        }
    }
}
