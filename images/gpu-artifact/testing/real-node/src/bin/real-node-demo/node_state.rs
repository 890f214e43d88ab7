//! What the demo shows of the node's state once the examples ran: the node's pool, the claims and
//! their devices, the CDI specs gpu-handler wrote on the node (read inside the node: its own
//! `/run/cdi`, not the machine's) and the MIG instances in the mock NVML's state. A Pod that runs
//! must have its claims' specs on the node; a missing spec or state file fails the demo.

use std::collections::BTreeMap;

use anyhow::Context;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::ListParams;
use kube::{Api, Client};
use real_node::node::RealNode;
use serde_json::Value;

const CDI_DIR: &str = "/var/run/cdi";
const MOCK_NVML_STATE: &str = "/run/gpu-mock-nvml/state.json";
/// gpu-handler's CDI spec of a claim: `<prefix><claim uid>.json`.
const SPEC_PREFIX: &str = "gpu.deckhouse.io-claim_";

pub async fn claims_and_specs(client: &Client, node: &RealNode, namespace: &str) -> anyhow::Result<()> {
    let slices = Api::<ResourceSlice>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    println!(
        "\n== the node's pool: {} devices in {} ResourceSlices",
        slices
            .iter()
            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
            .sum::<usize>(),
        slices.len()
    );
    println!("\n== claims and the devices they were prepared with");
    let mut names_by_uid = BTreeMap::new();
    for claim in Api::<ResourceClaim>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items
    {
        let name = claim.metadata.name.clone().unwrap_or_default();
        let devices: Vec<String> = claim
            .status
            .and_then(|s| s.allocation)
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .map(|r| r.iter().map(|r| r.device.clone()).collect())
            .unwrap_or_default();
        println!("   {name:<28} {}", devices.join(", "));
        names_by_uid.insert(claim.metadata.uid.unwrap_or_default(), name);
    }

    println!("\n== CDI specs gpu-handler wrote on the node ({CDI_DIR}, read inside the node)");
    let files = node.files();
    let specs = files.list(CDI_DIR)?;
    for file in &specs {
        // Other writers share the directory: NVIDIA's runtime reads the spec nvidia-ctk generates.
        let Some(uid) = file.strip_prefix(SPEC_PREFIX).and_then(|f| f.strip_suffix(".json")) else {
            println!("   {file} (not gpu-handler's)");
            continue;
        };
        let path = format!("{CDI_DIR}/{file}");
        let spec: Value = serde_json::from_slice(&files.read(&path)?)
            .with_context(|| format!("gpu-handler's CDI spec {path} on the node is not JSON"))?;
        let claim = names_by_uid.get(uid).map_or("?", String::as_str);
        let edits = &spec["containerEdits"];
        println!(
            "   {file} (claim {claim}): devices {:?}; {} driver mounts, hooks {:?}",
            spec["devices"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| d["name"].as_str().unwrap_or_default())
                .collect::<Vec<_>>(),
            edits["mounts"].as_array().map_or(0, Vec::len),
            edits["hooks"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|h| h["args"][1].as_str().unwrap_or_default())
                .collect::<Vec<_>>()
        );
    }
    let missing = running_pods_claims_without_spec(client, namespace, &names_by_uid, &specs).await?;
    anyhow::ensure!(
        missing.is_empty(),
        "claims of running Pods have no CDI spec on the node: {missing:?} (specs there: {specs:?})"
    );
    Ok(())
}

/// Claims of the namespace's running Pods whose spec file is not in `specs`.
async fn running_pods_claims_without_spec(
    client: &Client,
    namespace: &str,
    names_by_uid: &BTreeMap<String, String>,
    specs: &[String],
) -> anyhow::Result<Vec<String>> {
    let mut missing = Vec::new();
    for pod in Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items
    {
        let status = pod.status.unwrap_or_default();
        if status.phase.as_deref() != Some("Running") {
            continue;
        }
        let mut claims: Vec<String> = status
            .resource_claim_statuses
            .unwrap_or_default()
            .into_iter()
            .filter_map(|c| c.resource_claim_name)
            .collect();
        claims.extend(status.extended_resource_claim_status.map(|c| c.resource_claim_name));
        for claim in claims {
            let uid = names_by_uid
                .iter()
                .find(|(_, name)| **name == claim)
                .map(|(uid, _)| uid);
            let has_spec = uid.is_some_and(|uid| specs.contains(&format!("{SPEC_PREFIX}{uid}.json")));
            if !has_spec {
                missing.push(format!("{}/{claim}", pod.metadata.name.clone().unwrap_or_default()));
            }
        }
    }
    Ok(missing)
}

pub fn mig_instances(node: &RealNode) -> anyhow::Result<()> {
    println!("\n== MIG instances in the mock NVML's state ({MOCK_NVML_STATE}, read inside the node)");
    let state: Value = serde_json::from_str(&node.files().read_to_string(MOCK_NVML_STATE)?)
        .with_context(|| format!("the mock NVML state {MOCK_NVML_STATE} on the node is not JSON"))?;
    for (card, gpu) in state["gpus"].as_object().into_iter().flatten() {
        for gi in gpu["gpuInstances"].as_array().into_iter().flatten() {
            println!(
                "   {card}: GPU instance {} (profile {}) at {}",
                gi["id"], gi["profileId"], gi["placement"]
            );
        }
    }
    Ok(())
}
