//! ResourceClaims allocated the way the scheduler allocates them: the claim is created with one
//! request, then `status.allocation` is written through the status subresource, naming our driver,
//! the node's pool and one device, with a node selector for the node. No Pod and no `reservedFor`:
//! the bench calls the plugin itself, as the kubelet would for a Pod of the node.

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::api::{Patch, PatchParams, PostParams};
use kubelet_plugin_api::dra_v1;
use serde_json::json;
use testbed::TestNamespace;

use crate::support::DRIVER;

/// A claim in the API server, as the kubelet names it in a DRA call.
#[derive(Debug, Clone)]
pub struct AllocatedClaim {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub device: String,
}

impl AllocatedClaim {
    /// The claim as it goes into NodePrepareResources / NodeUnprepareResources.
    pub fn wire(&self) -> dra_v1::Claim {
        dra_v1::Claim {
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            name: self.name.clone(),
        }
    }
}

/// Creates claim `name` and writes an allocation of `device` in `node`'s pool into its status.
pub async fn allocate(ns: &TestNamespace, node: &str, name: &str, device: &str) -> AllocatedClaim {
    let claims = ns.api::<ResourceClaim>();
    // The class is never looked up: the allocation is written directly, as a scheduler would.
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "bench-gpu"}}]}},
    }))
    .unwrap();
    let created = claims.create(&PostParams::default(), &claim).await.unwrap();
    let allocation = json!({"status": {"allocation": {
        "devices": {"results": [{
            "request": "gpu", "driver": DRIVER, "pool": dra_offers::pool_name(node), "device": device,
        }]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]},
        ]}]},
    }}});
    claims
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&allocation))
        .await
        .unwrap_or_else(|e| panic!("claim {}/{name}: writing the allocation of {device}: {e}", ns.name()));
    AllocatedClaim {
        namespace: ns.name().to_owned(),
        name: name.to_owned(),
        uid: created.metadata.uid.unwrap(),
        device: device.to_owned(),
    }
}
