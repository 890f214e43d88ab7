//! `make demo`: the module on the test bed's real node (tools/demo/demo-up.sh starts the node and
//! exports GPU_REALNODE_ENV). Applies docs/examples as a user would (each Pod's image is the test
//! bed's userland image, since no registry serves the examples' CUDA image, and each Pod runs once),
//! prints what every container printed, and walks through what the system stored: PhysicalGPUs, the
//! node's devices, the claims, the CDI specs on the node and the MIG instances. Leaves it all running.

mod node_state;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
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
        if file == "shared-and-vfio-pods.yaml" {
            // As an admin would add shares once the MIG and whole-card jobs are placed: best fit gives
            // a share the smallest card that takes it (the A30, whose memory is the least), and a share
            // placed first would hold the one card the MIG jobs' profile exists on.
            wait_scheduled(&client, &pods).await?;
        }
        let text = std::fs::read_to_string(repo_root().join("docs/examples").join(file))?;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let mut object: Value = serde::Deserialize::deserialize(document)?;
            if object.is_null() {
                continue;
            }
            if object["kind"] == "Pod" {
                // A Pod whose command never ends (the VM launcher) is shown once it runs; the others
                // once they are done, so their output is whole and their claims unprepared.
                let keeps_running = object["spec"]["containers"].to_string().contains("infinity");
                pods.push((
                    object["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                    keeps_running,
                ));
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
    let mut failed = Vec::new();
    for (name, keeps_running) in &pods {
        let until = if *keeps_running { "run" } else { "finish" };
        let pod = wait_until(&format!("Pod {name} to {until}"), Duration::from_secs(300), || {
            let api = api.clone();
            async move {
                let pod = api.get(name).await?;
                let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
                let shown = ["Succeeded", "Failed"].contains(&phase.as_str()) || (*keeps_running && phase == "Running");
                Ok(if shown {
                    Progress::Done(pod)
                } else {
                    Progress::Pending(describe(&pod))
                })
            }
        })
        .await?;
        let printed = api.logs(name, &LogParams::default()).await.unwrap_or_default();
        let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
        if phase == "Failed" {
            failed.push(format!("{name}: {}", describe(&pod)));
        }
        println!("\n== {name} ({phase}) printed:");
        print!(
            "{}",
            if printed.is_empty() {
                "   (nothing: it keeps running)\n".into()
            } else {
                printed
            }
        );
    }
    node_state::claims_and_specs(&client, node, NAMESPACE).await?;
    node_state::mig_instances(node)?;
    if !failed.is_empty() {
        anyhow::bail!("example Pods failed: {}", failed.join("; "));
    }
    println!("\n== DEMO READY: the node stays up; `make demo-down` stops it.");
    println!("   kubeconfig: {}", node.kubeconfig.display());
    Ok(())
}

/// Waits until every Pod of `pods` has a node (its claims allocated).
async fn wait_scheduled(client: &Client, pods: &[(String, bool)]) -> anyhow::Result<()> {
    let api = Api::<Pod>::namespaced(client.clone(), NAMESPACE);
    for (name, _) in pods {
        wait_until(
            &format!("Pod {name} placed on a node"),
            Duration::from_secs(300),
            || {
                let api = api.clone();
                async move {
                    let pod = api.get(name).await?;
                    Ok(match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                        Some(_) => Progress::Done(()),
                        None => Progress::Pending(describe(&pod)),
                    })
                }
            },
        )
        .await?;
    }
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
