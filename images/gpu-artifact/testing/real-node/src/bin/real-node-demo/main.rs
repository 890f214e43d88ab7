//! `make demo`: the module on the test bed's real node (tools/demo/demo-up.sh starts the node and
//! exports GPU_REALNODE_ENV). Applies docs/examples as a user would (each Pod's image is the test
//! bed's userland image, since no registry serves the examples' CUDA image, and each Pod runs once),
//! prints what every container printed, and walks through what the system stored: PhysicalGPUs, the
//! node's devices, the claims, the CDI specs on the node and the MIG instances. Leaves it all running.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use real_node::module_status::{describe, wait_module_ready};
use real_node::node::{RealNode, repo_root};
use serde_json::{Value, json};
use testbed::{Progress, wait_until};

const NAMESPACE: &str = "demo";
const IMAGE: &str = "registry.testbed.invalid/workload:1";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let node = RealNode::get().await?;
    let client = node.client().await?;
    println!(
        "== gpu module on the real node {} (Kubernetes {})",
        node.name, node.k8s_version
    );
    println!(
        "   kubelet + containerd + runc in the node's own namespaces; logs in {}",
        node.dir.join("logs").display()
    );
    wait_module_ready(&client).await?;
    println!("\n== the module's Pods (installed by hooks + helm, as Deckhouse does)");
    for pod in Api::<Pod>::namespaced(client.clone(), "d8-gpu")
        .list(&ListParams::default())
        .await?
        .items
    {
        println!(
            "   {:<40} {}",
            pod.metadata.name.clone().unwrap_or_default(),
            describe(&pod).split(';').next().unwrap_or_default()
        );
    }
    // MPS shares need the node's consent (the examples' two MPS Pods).
    let patch = json!({"metadata": {"labels": {"gpu.deckhouse.io/allow-mps": "true"}}});
    Api::<Node>::all(client.clone())
        .patch(&node.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
        )
        .await;
    inventory(&client).await?;

    let mut pods = Vec::new();
    for file in [
        "gpuclass-a30.yaml",
        "gpuclass-h100.yaml",
        "gpuclass-mig-2g12gb.yaml",
        "gpuclass-mps.yaml",
        "gpuclass-vfio.yaml",
        "claim-template-and-pod.yaml",
        "shared-and-vfio-pods.yaml",
    ] {
        let text = std::fs::read_to_string(repo_root().join("docs/examples").join(file))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let mut object: Value = serde::Deserialize::deserialize(document)?;
            if object.is_null() {
                continue;
            }
            if object["kind"] == "Pod" {
                pods.push(object["metadata"]["name"].as_str().unwrap_or_default().to_owned());
                object["spec"]["restartPolicy"] = json!("Never");
                for container in object["spec"]["containers"].as_array_mut().into_iter().flatten() {
                    container["image"] = json!(IMAGE);
                    container["imagePullPolicy"] = json!("Never");
                }
            }
            if !["GPUClass", "DeviceClass"].contains(&object["kind"].as_str().unwrap_or_default()) {
                object["metadata"]["namespace"] = json!(NAMESPACE);
            }
            apply(&client, &object).await?;
        }
        println!("== applied docs/examples/{file}");
    }
    println!(
        "   (each example Pod runs image {IMAGE}, a userland with sh and ldconfig: nvidia-smi and the\n    driver's libraries come from the node's driver root through the claim's CDI spec)"
    );

    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for name in &pods {
        let pod = wait_until(&format!("Pod {name} to run"), Duration::from_secs(300), || {
            let api = api.clone();
            async move {
                let pod = api.get(name).await?;
                let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                Ok(if ["Succeeded", "Running", "Failed"].contains(&phase.as_str()) {
                    Progress::Done(pod)
                } else {
                    Progress::Pending(describe(&pod))
                })
            }
        })
        .await?;
        let printed = api.logs(name, &LogParams::default()).await.unwrap_or_default();
        println!(
            "\n== {name} ({}) printed:",
            pod.status.and_then(|s| s.phase).unwrap_or_default()
        );
        print!(
            "{}",
            if printed.is_empty() {
                "   (nothing: it keeps running)\n".into()
            } else {
                printed
            }
        );
    }
    claims(&client, node).await?;
    mig_instances(node);
    println!("\n== DEMO READY: the node stays up; `make demo-down` stops it.");
    println!("   kubeconfig: {}", node.kubeconfig.display());
    Ok(())
}

async fn apply(client: &Client, object: &Value) -> anyhow::Result<()> {
    let gvk = kube::api::GroupVersionKind::try_from(&kube::core::TypeMeta {
        api_version: object["apiVersion"].as_str().unwrap_or_default().into(),
        kind: object["kind"].as_str().unwrap_or_default().into(),
    })?;
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<kube::api::DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
        Api::namespaced_with(client.clone(), NAMESPACE, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    api.patch(name, &PatchParams::apply("gpu-demo").force(), &Patch::Apply(object))
        .await?;
    Ok(())
}

async fn inventory(client: &Client) -> anyhow::Result<()> {
    let gvk = kube::api::GroupVersionKind::gvk("gpu.deckhouse.io", "v1alpha1", "PhysicalGPU");
    let (resource, _) = kube::discovery::pinned_kind(client, &gvk).await?;
    let gpus: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
    println!(
        "\n== PhysicalGPUs (gpu-node-agent, from the node's sysfs; gpu-controller and gpu-handler fill the status)"
    );
    for gpu in gpus.list(&ListParams::default()).await?.items {
        let value = serde_json::to_value(&gpu)?;
        let conditions: Vec<String> = value["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{}={}",
                    c["type"].as_str().unwrap_or_default(),
                    c["status"].as_str().unwrap_or_default()
                )
            })
            .collect();
        println!(
            "   {:<28} {}",
            gpu.metadata.name.unwrap_or_default(),
            conditions.join(" ")
        );
    }
    Ok(())
}

async fn claims(client: &Client, node: &RealNode) -> anyhow::Result<()> {
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
    for claim in Api::<ResourceClaim>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await?
        .items
    {
        let devices: Vec<String> = claim
            .status
            .and_then(|s| s.allocation)
            .and_then(|a| a.devices)
            .and_then(|d| d.results)
            .map(|r| r.iter().map(|r| r.device.clone()).collect())
            .unwrap_or_default();
        println!(
            "   {:<28} {}",
            claim.metadata.name.unwrap_or_default(),
            devices.join(", ")
        );
    }
    println!("\n== CDI specs gpu-handler wrote on the node (/var/run/cdi)");
    for entry in std::fs::read_dir(node.node_path("/var/run/cdi"))?.filter_map(Result::ok) {
        let spec: Value = serde_json::from_slice(&std::fs::read(entry.path())?)?;
        let edits = &spec["containerEdits"];
        println!(
            "   {}: devices {:?}; {} driver mounts, hooks {:?}",
            entry.file_name().to_string_lossy(),
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
    Ok(())
}

fn mig_instances(node: &RealNode) {
    println!("\n== MIG instances in the mock NVML's state");
    let text = std::fs::read_to_string(node.node_path("/run/gpu-mock-nvml/state.json")).unwrap_or_default();
    let state: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    for (card, gpu) in state["gpus"].as_object().into_iter().flatten() {
        for gi in gpu["gpuInstances"].as_array().into_iter().flatten() {
            println!(
                "   {card}: GPU instance {} (profile {}) at {}",
                gi["id"], gi["profileId"], gi["placement"]
            );
        }
    }
}
