//! gpu-controller sets DriverReady from the driver-validator Pod on the card's node: Unknown while
//! there is none, True when it is Ready, False with the Pod's reason and message otherwise. It runs
//! as a real process under the controller's RBAC, leader-elected through a Lease.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use gpu_api::PhysicalGPU;
use host_fixtures::{HostTree, NamedHost};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

fn driver_ready(gpu: &PhysicalGPU) -> Option<(String, String, String)> {
    let c = gpu
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "DriverReady")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn wait_condition(gpus: &Api<PhysicalGPU>, name: &str, status: &str) -> (String, String, String) {
    wait_until(
        &format!("DriverReady={status} on {name}"),
        Duration::from_secs(10),
        || async {
            let gpu = gpus.get(name).await?;
            Ok(match driver_ready(&gpu) {
                Some(c) if c.0 == status => Progress::Done(c),
                other => Progress::Pending(format!("{other:?}")),
            })
        },
    )
    .await
    .unwrap()
}

async fn set_ready(pods: &Api<Pod>, name: &str, ready: bool) {
    let status = if ready {
        json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    } else {
        json!({"phase": "Running",
               "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
               "initContainerStatuses": [{"name": "driver-validation", "image": "validator", "imageID": "", "ready": false,
                   "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "nvidia-smi: driver not loaded"}}}]})
    };
    let patch = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "status": status});
    pods.patch_status(name, &PatchParams::apply("e2e-kubelet").force(), &Patch::Apply(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_ready_follows_the_validator_pod() {
    let ns = TestNamespace::create("driver-ready").await.unwrap();
    install_crds(&ns.client()).await;
    let node = ReadyNode::register(&ns, "gpu", BTreeMap::new()).await.unwrap();
    let ws = AgentWorkspace::new();
    std::fs::create_dir_all(ws.host_root()).unwrap();
    NamedHost::A30Pcie.build_into(&HostTree::at(&ws.host_root()));
    let agent_kubeconfig = kubeconfig_for(&ns, "gpu-node-agent", node_agent_rules(), ws.dir.path()).await;
    let (agent, agent_port) = start_agent(&ws, node.name(), &agent_kubeconfig);
    wait_ready(agent_port, &agent).await;

    let (controller, _port) = start_controller(&ns, ws.dir.path(), "Debug", true).await;

    let gpus = Api::<PhysicalGPU>::all(ns.client());
    let name = format!("{}-0-10de-20b7", node.name());
    let unknown = wait_condition(&gpus, &name, "Unknown").await;
    assert_eq!(unknown.1, "ValidatorNotFound", "controller log:\n{}", controller.log());
    let lease = ns.api::<Lease>().get("gpu-controller").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity.as_deref(),
        Some("gpu-controller-0"),
        "it leads through the Lease"
    );

    let pods = ns.api::<Pod>();
    let validator: Pod = serde_json::from_value(json!({
        "metadata": {"name": "validator", "labels": {"app": "gpu-driver-validator"}},
        "spec": {"nodeName": node.name(), "containers": [{"name": "validator", "image": "validator"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &validator).await.unwrap();
    set_ready(&pods, "validator", true).await;
    let ready = wait_condition(&gpus, &name, "True").await;
    assert_eq!(ready.1, "ValidatorReady");

    set_ready(&pods, "validator", false).await;
    let failed = wait_condition(&gpus, &name, "False").await;
    assert_eq!(failed.1, "CrashLoopBackOff");
    assert!(
        failed.2.contains("nvidia-smi: driver not loaded"),
        "the Pod's message reaches the condition: {}",
        failed.2
    );

    // The agent owns the rest of the status and does not fight the controller over it.
    let gpu = gpus.get(&name).await.unwrap();
    assert!(gpu.status.as_ref().unwrap().pci_info.is_some());
    let managers: Vec<_> = gpu.managed_fields().iter().filter_map(|m| m.manager.clone()).collect();
    assert!(
        managers.contains(&"gpu-controller".to_owned()) && managers.contains(&"gpu-node-agent".to_owned()),
        "{managers:?}"
    );
}
