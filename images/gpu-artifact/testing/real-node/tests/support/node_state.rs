//! What the node keeps about prepared claims, read inside the node: gpu-handler's checkpoint, the
//! CDI specs it wrote (the node's own `/var/run/cdi`) and the mock NVML's state (its MIG instances).

use std::collections::BTreeMap;

use kube::Api;
use real_node::node::RealNode;
use serde_json::Value;

pub const CHECKPOINT: &str = "/var/lib/kubelet/plugins/gpu.deckhouse.io/checkpoint.json";
pub const CDI_DIR: &str = "/var/run/cdi";
/// The mock NVML's state on the node: cards, MIG mode, GPU instances.
pub const MOCK_NVML_STATE: &str = "/run/gpu-mock-nvml/state.json";

pub fn checkpoint(node: &RealNode) -> Value {
    let text = node.files().read_to_string(CHECKPOINT).unwrap();
    let outer: Value = serde_json::from_str(&text).unwrap();
    // The checkpoint keeps its data as a checksummed string or object; read either.
    match &outer["data"] {
        Value::String(inner) => serde_json::from_str(inner).unwrap(),
        Value::Null => outer,
        data => data.clone(),
    }
}

pub fn claim_uids(checkpoint: &Value) -> Vec<String> {
    checkpoint["claims"]
        .as_object()
        .map(|c| c.keys().cloned().collect())
        .unwrap_or_default()
}

/// The node's CDI specs (`/var/run/cdi`, which on the node is its own `/run/cdi`): the directory
/// exists once gpu-handler runs, so a missing one fails the test.
pub fn cdi_specs(node: &RealNode) -> Vec<String> {
    node.files().list(CDI_DIR).unwrap()
}

/// The spec file gpu-handler writes for a claim.
pub fn spec_of(uid: &str) -> String {
    format!("gpu.deckhouse.io-claim_{uid}.json")
}

pub async fn claim_uid(client: &kube::Client, ns: &str, name: &str) -> String {
    Api::<k8s_openapi::api::resource::v1::ResourceClaim>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap()
}

/// Every card's MIG state in the mock NVML (`migCurrent`, `migPending`, GPU instances), for the
/// cards where it differs from the boot state the fixture gives every card (MIG off, no
/// instance); the mock writes its state file only once something changed.
pub fn mig_state(node: &RealNode) -> BTreeMap<String, (bool, bool, usize)> {
    let (dir, file) = MOCK_NVML_STATE.rsplit_once('/').unwrap();
    if !node.files().list(dir).unwrap().iter().any(|name| name == file) {
        return BTreeMap::new();
    }
    let state: Value = serde_json::from_str(&node.files().read_to_string(MOCK_NVML_STATE).unwrap()).unwrap();
    let gpus = state["gpus"].as_object().cloned().unwrap_or_default();
    gpus.into_iter()
        .map(|(card, gpu)| {
            let instances = gpu["gpuInstances"].as_array().map_or(0, Vec::len);
            let flag = |name: &str| gpu[name].as_bool().unwrap_or(false);
            (card, (flag("migCurrent"), flag("migPending"), instances))
        })
        .filter(|(_, state)| *state != (false, false, 0))
        .collect()
}
