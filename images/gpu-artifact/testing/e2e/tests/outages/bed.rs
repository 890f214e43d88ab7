//! The outage test's bed: the private control plane's namespace, the A30 node with its node agent,
//! gpu-handler and kubelet simulator behind the [`ApiProxy`], and what the test reads back from them.

use std::collections::BTreeSet;
use std::time::Duration;

use gpu_api::PhysicalGPU;
use host_fixtures::ToolStandIns;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use kubelet_sim::{KubeletSim, KubeletSimOptions};
use serde_json::json;
use testbed::{ComponentProcess, Progress, ReadyNode, TestCluster, TestNamespace, wait_until};

use super::*;
use crate::support::components::*;
use crate::support::*;

pub struct Bed {
    pub ns: TestNamespace,
    pub node: ReadyNode,
    pub ws: AgentWorkspace,
    pub proxy: ApiProxy,
    pub tools: ToolStandIns,
    pub handler_kubeconfig: std::path::PathBuf,
    pub mock: mock_nvml::test_support::MockInstall,
    pub handler: ComponentProcess,
    pub kubelet: KubeletSim,
    pub _agent: ComponentProcess,
}

impl Bed {
    pub async fn start(cluster: TestCluster) -> Bed {
        let ns = TestNamespace::create_in(cluster, "outages").await.unwrap();
        install_crds(&ns.client()).await;
        let node = ReadyNode::register(&ns, "gpu", Default::default()).await.unwrap();
        let ws = AgentWorkspace::new();
        let (_host, tools) = a30_host(&ws.host_root());
        let api = api_port(ns.cluster().kubeconfig_path());
        let proxy = ApiProxy::start(api).await;
        let agent_kubeconfig = kubeconfig_for(&ns, "gpu-node-agent", node_agent_rules(), ws.dir.path()).await;
        let handler_kubeconfig = kubeconfig_for(&ns, "gpu-handler", handler_rules(), ws.dir.path()).await;
        through_proxy(&agent_kubeconfig, api, proxy.port);
        through_proxy(&handler_kubeconfig, api, proxy.port);
        let (agent, port) = start_agent(&ws, node.name(), &agent_kubeconfig);
        wait_ready(port, &agent).await;
        let dir = ws.dir.path().join("nvml");
        std::fs::create_dir_all(&dir).unwrap();
        let mock =
            mock_nvml::test_support::MockInstall::new(&dir, &mock_nvml::test_support::machine_fixture("a30.yaml"))
                .unwrap();
        let kubelet = KubeletSim::start(
            client_through(ns.cluster().config(), proxy.port),
            node.name(),
            ws.host_root().join("var/lib/kubelet"),
            KubeletSimOptions {
                backoff_max: Duration::from_secs(2),
                ..KubeletSimOptions::default()
            },
        );
        let handler = Self::handler(&ws, node.name(), &handler_kubeconfig, &mock, &tools, "");
        let bed = Bed {
            ns,
            node,
            ws,
            proxy,
            tools,
            handler_kubeconfig,
            mock,
            handler,
            kubelet,
            _agent: agent,
        };
        bed.wait_gpu().await;
        bed.set_driver_ready().await;
        bed
    }

    pub fn handler(
        ws: &AgentWorkspace,
        node: &str,
        kubeconfig: &std::path::Path,
        mock: &mock_nvml::test_support::MockInstall,
        tools: &ToolStandIns,
        faults: &str,
    ) -> ComponentProcess {
        let env = handler_fault_env(tools, &ws.dir.path().join("fault-reached"), faults);
        start_handler_with(ws, node, kubeconfig, &mock.library_path(), &env).0
    }

    pub fn restart_handler(&mut self, faults: &str) {
        self.handler.kill();
        self.handler = Self::handler(
            &self.ws,
            self.node.name(),
            &self.handler_kubeconfig,
            &self.mock,
            &self.tools,
            faults,
        );
    }

    pub fn admin(&self) -> Client {
        self.ns.client()
    }

    pub fn gpu_name(&self) -> String {
        format!("{}-0-10de-20b7", self.node.name())
    }

    pub async fn wait_gpu(&self) {
        let gpus = Api::<PhysicalGPU>::all(self.admin());
        let name = self.gpu_name();
        wait_until("the agent's PhysicalGPU", Duration::from_secs(60), || async {
            Ok(match gpus.get_opt(&name).await? {
                Some(_) => Progress::Done(()),
                None => Progress::Pending("absent".into()),
            })
        })
        .await
        .unwrap();
    }

    pub async fn set_driver_ready(&self) {
        let condition = json!({"type": "DriverReady", "status": "True", "reason": "ValidatorReady",
            "message": "set by the e2e test", "lastTransitionTime": "2025-01-01T00:00:00Z"});
        let patch = json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
            "metadata": {"name": self.gpu_name()}, "status": {"conditions": [condition]}});
        Api::<PhysicalGPU>::all(self.admin())
            .patch_status(
                &self.gpu_name(),
                &PatchParams::apply("gpu-controller").force(),
                &Patch::Apply(&patch),
            )
            .await
            .unwrap();
    }

    /// Device names of the node's slices (every one, duplicates kept).
    pub async fn offered(&self) -> Vec<String> {
        let slices = Api::<ResourceSlice>::all(self.admin())
            .list(&ListParams::default().fields(&format!("spec.nodeName={}", self.node.name())))
            .await
            .unwrap();
        slices
            .items
            .iter()
            .flat_map(|slice| slice.spec.devices.iter().flatten().map(|d| d.name.clone()))
            .collect()
    }

    pub fn checkpoint(&self) -> serde_json::Value {
        let path = self
            .ws
            .host_root()
            .join("var/lib/kubelet/plugins/gpu.deckhouse.io/checkpoint.json");
        // No file is an empty checkpoint (nothing prepared yet); any other failure fails the test.
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::Value::Null,
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }

    pub fn mig_instances(&self) -> usize {
        let state = self.mock.state().snapshot().unwrap();
        state.gpus.values().map(|gpu| gpu.gpu_instances.len()).sum()
    }

    pub async fn prepared_within(&self, pod: &str, deadline: Duration) {
        let ns = self.ns.name().to_owned();
        wait_until(&format!("{pod} prepared"), deadline, || async {
            Ok(match self.kubelet.prepared(&ns, pod) {
                Some(_) => Progress::Done(()),
                None => Progress::Pending(scheduling_message(&self.ns.api::<Pod>().get(pod).await?)),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", self.handler.log()));
    }

    /// Nothing duplicated or lost: one PhysicalGPU for the card, each device once across the node's
    /// slices, and exactly the prepared Pods' claims in the checkpoint, each once with its instance.
    pub async fn assert_consistent(&self, pods: &[&str]) {
        assert_eq!(
            gpus_of(&self.admin(), self.node.name()).await,
            vec![self.gpu_name()],
            "one PhysicalGPU"
        );
        let offered = self.offered().await;
        let unique: BTreeSet<&String> = offered.iter().collect();
        assert_eq!(unique.len(), offered.len(), "a device published twice: {offered:?}");
        let claims = self.ns.api::<ResourceClaim>();
        let mut wanted = BTreeSet::new();
        for pod in pods {
            let prepared = self.kubelet.prepared(self.ns.name(), pod).unwrap_or_default();
            for claim in prepared.keys() {
                wanted.insert(claims.get(claim).await.unwrap().metadata.uid.unwrap());
            }
        }
        // The Pods deleted just before are unprepared by the kubelet in the background: wait for
        // the checkpoint to settle on the prepared claims (the deadline's error names what it holds).
        let recorded = wait_until(
            "the checkpoint to hold exactly the prepared claims",
            SCHEDULING_DEADLINE,
            || {
                let recorded: BTreeSet<String> = self.checkpoint()["data"]["claims"]
                    .as_object()
                    .map(|c| c.keys().cloned().collect())
                    .unwrap_or_default();
                let outcome = if recorded == wanted {
                    Progress::Done(recorded)
                } else {
                    Progress::Pending(format!("{recorded:?}, prepared {wanted:?}"))
                };
                async move { Ok(outcome) }
            },
        )
        .await
        .unwrap();
        assert_eq!(recorded, wanted, "the checkpoint holds exactly the prepared claims");
        assert_eq!(
            self.mig_instances(),
            wanted.len(),
            "one MIG instance per prepared claim"
        );
    }
}
