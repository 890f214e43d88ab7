//! A GPU node for the handler's e2e tests: a Node, its fixture host and node agent, the PhysicalGPU
//! the agent publishes, the mock libnvidia-ml installed where the handler will load it, and
//! DriverReady applied under gpu-controller's field manager.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gpu_api::PhysicalGPU;
use host_fixtures::{HostTree, NamedHost};
use kube::Api;
use kube::api::{Patch, PatchParams};
use mock_nvml::test_support::{MockInstall, machine_fixture};
use serde_json::{Value, json};
use testbed::{ComponentProcess, Progress, ReadyNode, TestNamespace, wait_until};

use crate::support::components::*;

pub struct Setup {
    pub ns: TestNamespace,
    pub node: ReadyNode,
    pub ws: AgentWorkspace,
    pub gpus: Api<PhysicalGPU>,
    pub name: String,
    pub address: &'static str,
    pub machine: &'static str,
    /// Every PhysicalGPU of the node (the first is `name`).
    pub names: Vec<String>,
    /// The fixture host as built (it knows its devices, which the kernel emulator needs).
    pub host: std::sync::Arc<HostTree>,
    pub handler_kubeconfig: PathBuf,
    /// The node agent's health and metrics port.
    pub agent_port: u16,
    _agent: ComponentProcess,
}

/// A node with `fixture`'s sysfs, its agent running and its PhysicalGPU published; no handler yet.
pub async fn setup(test: &str, fixture: NamedHost) -> Setup {
    setup_in(TestNamespace::create(test).await.unwrap(), fixture).await
}

/// [`setup`] in `ns` (of a private control plane, say).
pub async fn setup_in(ns: TestNamespace, fixture: NamedHost) -> Setup {
    let (address, device, machine) = match fixture {
        NamedHost::A30Pcie | NamedHost::A30SharedIommuGroup => ("0000:01:00.0", "20b7", "a30.yaml"),
        NamedHost::H100Pcie => ("0000:41:00.0", "2331", "h100-pcie.yaml"),
        NamedHost::H100SxmX8 => ("0000:18:00.0", "2330", "h100-sxm5-80gb-x8.yaml"),
        NamedHost::VmQemu => ("0000:06:00.0", "20b7", "a30-vm.yaml"),
        other => panic!("no mock NVML machine for {other:?}"),
    };
    install_crds(&ns.client()).await;
    let node = ReadyNode::register(&ns, "gpu", BTreeMap::new()).await.unwrap();
    let ws = AgentWorkspace::new();
    std::fs::create_dir_all(ws.host_root()).unwrap();
    let host = std::sync::Arc::new(HostTree::at(&ws.host_root()));
    fixture.build_into(&host);
    let agent_kubeconfig = kubeconfig_for(&ns, "gpu-node-agent", node_agent_rules(), ws.dir.path()).await;
    let handler_kubeconfig = kubeconfig_for(&ns, "gpu-handler", handler_rules(), ws.dir.path()).await;
    let (agent, port) = start_agent(&ws, node.name(), &agent_kubeconfig);
    wait_ready(port, &agent).await;
    let gpus = Api::<PhysicalGPU>::all(ns.client());
    let name = format!("{}-0-10de-{device}", node.name());
    wait_for(&gpus, &name, "the agent's pciInfo", |s| {
        s["pciInfo"]["address"] == address
    })
    .await;
    let cards = host
        .devices()
        .iter()
        .filter(|d| d.vendor == 0x10de && d.class >> 16 == 0x03)
        .count();
    let names: Vec<String> = (0..cards)
        .map(|i| format!("{}-{i}-10de-{device}", node.name()))
        .collect();
    for other in &names[1..] {
        wait_for(&gpus, other, "the agent's pciInfo", |s| {
            s["pciInfo"]["address"].is_string()
        })
        .await;
    }
    Setup {
        ns,
        node,
        ws,
        gpus,
        name,
        address,
        machine,
        names,
        host,
        handler_kubeconfig,
        agent_port: port,
        _agent: agent,
    }
}

impl Setup {
    /// The mock library with this host's machine description in `<workspace>/<dir>`.
    pub fn install_mock(&self, dir: &str) -> MockInstall {
        let dir = self.ws.dir.path().join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        MockInstall::new(&dir, &machine_fixture(self.machine)).unwrap()
    }

    pub fn start_handler(&self, library: &Path) -> ComponentProcess {
        start_handler(&self.ws, self.node.name(), &self.handler_kubeconfig, library).0
    }

    /// Sets DriverReady on every card of the node as gpu-controller would.
    pub async fn set_driver_ready(&self, status: &str) {
        let condition = json!({"type": "DriverReady", "status": status, "reason": "ValidatorReady",
            "message": "set by the e2e test", "lastTransitionTime": "2025-01-01T00:00:00Z"});
        for name in &self.names {
            let patch = json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
                "metadata": {"name": name}, "status": {"conditions": [condition]}});
            self.gpus
                .patch_status(
                    name,
                    &PatchParams::apply("gpu-controller").force(),
                    &Patch::Apply(&patch),
                )
                .await
                .unwrap();
        }
    }

    pub async fn wait_status(&self, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        wait_for(&self.gpus, &self.name, what, done).await
    }
}

pub async fn wait_for(gpus: &Api<PhysicalGPU>, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    wait_until(&format!("{what} on {name}"), Duration::from_secs(30), || async {
        let status = serde_json::to_value(gpus.get(name).await?.status).unwrap();
        Ok(if done(&status) {
            Progress::Done(status)
        } else {
            Progress::Pending(serde_yaml::to_string(&status).unwrap())
        })
    })
    .await
    .unwrap()
}

pub fn healthy(status: &Value) -> Option<&Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "HardwareHealthy")
}

pub fn healthy_is(status: &Value, want: &str) -> bool {
    healthy(status).is_some_and(|c| c["status"] == want)
}

/// The status with what differs between runs taken out: condition timestamps, the node's name.
pub fn normalized(mut status: Value, node: &str) -> Value {
    for condition in status["conditions"].as_array_mut().into_iter().flatten() {
        condition.as_object_mut().unwrap().remove("lastTransitionTime");
    }
    if status["nodeInfo"]["nodeName"] == node {
        status["nodeInfo"]["nodeName"] = json!("NODE");
    }
    status
}

pub fn expected(file: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/expected")
        .join(file);
    serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The handler's count of write requests after its latest pass.
pub fn write_requests(handler: &ComponentProcess) -> Option<u64> {
    handler
        .log()
        .lines()
        .rev()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["fields"]["message"] == "pass done")
        .find_map(|line| line["fields"]["writes"].as_u64())
}
