//! A whole simulated GPU node for the kubelet-plugin e2e tests: the handler node of
//! `handler_node` (Node, fixture host, node agent, PhysicalGPU, DriverReady) plus the mock
//! libnvidia-ml, gpu-handler with its kubelet root inside the fixture host, and the kubelet
//! simulator speaking the real registration and DRA protocols to it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Api;
use kube::api::ListParams;
use kubelet_sim::{KubeletSim, KubeletSimOptions};
use mock_nvml::test_support::MockInstall;
use serde_json::Value;
use testbed::{ComponentProcess, Progress, wait_until};

use crate::handler_node::{Setup, setup};
use crate::support::components::start_handler_with;
use host_fixtures::NamedHost;

pub struct PluginNode {
    pub s: Setup,
    pub mock: MockInstall,
    pub handler: ComponentProcess,
    /// The handler's health and metrics port.
    pub handler_port: u16,
    pub kubelet: KubeletSim,
}

impl PluginNode {
    /// The node with DriverReady=True, its handler running with `handler_env` on top of the usual
    /// settings, the kubelet simulator started, and the node's slices published.
    pub async fn start(test: &str, fixture: NamedHost, handler_env: &[(&str, String)]) -> Self {
        let s = setup(test, fixture).await;
        s.set_driver_ready("True").await;
        Self::launch(s, handler_env).await
    }

    /// Starts the handler and the kubelet simulator on a prepared node; returns once the node
    /// offers `gpu0` (so DriverReady must become True, by the test or by gpu-controller). The
    /// simulator acts as the kubelet of the cluster's release (its health stream and
    /// `allocatedResourcesStatus`), with short retries and status syncs for the tests' deadlines.
    pub async fn launch(s: Setup, handler_env: &[(&str, String)]) -> Self {
        let options = test_kubelet_options(&s).await;
        Self::launch_with(s, handler_env, options).await
    }

    /// [`Self::launch`] with the simulator's options given.
    pub async fn launch_with(s: Setup, handler_env: &[(&str, String)], options: KubeletSimOptions) -> Self {
        let mock = s.install_mock("nvml");
        Self::launch_with_mock_and(s, mock, handler_env, options).await
    }

    /// [`Self::launch`] with a mock library the test installed (and perhaps changed) first.
    pub async fn launch_with_mock(s: Setup, mock: MockInstall, handler_env: &[(&str, String)]) -> Self {
        let options = test_kubelet_options(&s).await;
        Self::launch_with_mock_and(s, mock, handler_env, options).await
    }

    async fn launch_with_mock_and(
        s: Setup,
        mock: MockInstall,
        handler_env: &[(&str, String)],
        options: KubeletSimOptions,
    ) -> Self {
        let (handler, handler_port) = start_handler_with(
            &s.ws,
            s.node.name(),
            &s.handler_kubeconfig,
            &mock.library_path(),
            handler_env,
        );
        let kubelet = KubeletSim::start(s.ns.client(), s.node.name(), kubelet_root(&s), options);
        let node = Self {
            s,
            mock,
            handler,
            handler_port,
            kubelet,
        };
        // The card is published: whole, or (when MIG instances the node did not make hold it and
        // withhold the whole card) as its free placements.
        node.wait_offered_matching("gpu0", |device| device == "gpu0" || device.starts_with("gpu0-"))
            .await;
        node
    }

    /// A node whose DriverReady comes from the real gpu-controller (started here, under its RBAC,
    /// rendering the test's GPUClasses) through a driver-validator Pod the kubelet simulator runs.
    /// One per test binary: a gpu-controller speaks for every PhysicalGPU of the cluster.
    pub async fn start_with_controller(
        test: &str,
        fixture: NamedHost,
        handler_env: &[(&str, String)],
    ) -> (Self, ComponentProcess) {
        let (s, controller) = setup_with_controller(test, fixture).await;
        (Self::launch(s, handler_env).await, controller)
    }

    pub fn host(&self) -> PathBuf {
        self.s.ws.host_root()
    }

    pub fn cdi_file(&self, claim_uid: &str) -> PathBuf {
        self.host()
            .join(format!("var/run/cdi/gpu.deckhouse.io-claim_{claim_uid}.json"))
    }

    pub fn checkpoint(&self) -> Value {
        let path = kubelet_root(&self.s).join("plugins/gpu.deckhouse.io/checkpoint.json");
        // No file is an empty checkpoint (nothing prepared yet); any other failure fails the test.
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Value::Null,
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }

    /// UIDs of the claims in the checkpoint.
    pub fn checkpointed_claims(&self) -> Vec<String> {
        self.checkpoint()["data"]["claims"]
            .as_object()
            .map(|claims| claims.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Every device name in this node's slices.
    pub async fn offered(&self) -> Vec<String> {
        let slices = Api::<ResourceSlice>::all(self.s.ns.client())
            .list(&ListParams::default().fields(&format!("spec.nodeName={}", self.s.node.name())))
            .await
            .unwrap();
        let mut names: Vec<String> = slices
            .items
            .iter()
            .flat_map(|slice| slice.spec.devices.iter().flatten().map(|d| d.name.clone()))
            .collect();
        names.sort();
        names
    }

    pub async fn wait_offered(&self, device: &str) {
        self.wait_offered_matching(device, |offered| offered == device).await;
    }

    /// Waits until a device `matches` accepts is offered (`what` names it in the error).
    pub async fn wait_offered_matching(&self, what: &str, matches: impl Fn(&str) -> bool) {
        wait_until(
            &format!("{what} offered on {}", self.s.node.name()),
            Duration::from_secs(60),
            || async {
                let offered = self.offered().await;
                Ok(if offered.iter().any(|d| matches(d)) {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{offered:?}"))
                })
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", self.handler.log()));
    }

    /// Waits until the simulator has prepared every claim of `pod`; returns claim name -> CDI ids.
    pub async fn wait_prepared(&self, pod: &str) -> std::collections::BTreeMap<String, Vec<String>> {
        self.wait_prepared_in(self.s.ns.name(), pod).await
    }

    /// [`Self::wait_prepared`] for a Pod of namespace `ns`.
    pub async fn wait_prepared_in(&self, ns: &str, pod: &str) -> std::collections::BTreeMap<String, Vec<String>> {
        let pods = Api::<Pod>::namespaced(self.s.ns.client(), ns);
        wait_until(&format!("pod {ns}/{pod} prepared"), Duration::from_secs(90), || async {
            Ok(match self.kubelet.prepared(ns, pod) {
                Some(prepared) => Progress::Done(prepared),
                None => Progress::Pending(crate::support::scheduling_message(&pods.get(pod).await?)),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", self.handler.log()))
    }

    /// Waits until `pod` is gone from the API server (the simulator finalises deleted Pods).
    pub async fn wait_pod_gone(&self, pod: &str) {
        let pods = self.s.ns.api::<Pod>();
        wait_until(&format!("pod {pod} gone"), Duration::from_secs(60), || async {
            Ok(match pods.get_opt(pod).await? {
                None => Progress::Done(()),
                Some(p) => Progress::Pending(format!("{:?}", p.metadata.deletion_timestamp)),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", self.handler.log()));
    }

    /// Waits for the handler's `PrepareFailed` Event on a Pod of this node's namespace; returns its
    /// message (what the user reads in `kubectl describe pod`).
    pub async fn wait_prepare_failure_on_pod(&self) -> String {
        self.wait_prepare_failure_on(None).await
    }

    /// [`Self::wait_prepare_failure_on_pod`] for the Pod named `pod` (any Pod of the namespace when `None`).
    pub async fn wait_prepare_failure_on(&self, pod: Option<&str>) -> String {
        let ns = &self.s.ns;
        let events = Api::<Event>::namespaced(ns.client(), ns.name());
        wait_until("a PrepareFailed event on the pod", Duration::from_secs(60), || async {
            let list = events.list(&ListParams::default()).await?;
            let found = list.items.iter().find(|e| {
                let regarding = e.regarding.as_ref();
                e.reason.as_deref() == Some("PrepareFailed")
                    && regarding.and_then(|r| r.kind.as_deref()) == Some("Pod")
                    && pod.is_none_or(|pod| regarding.and_then(|r| r.name.as_deref()) == Some(pod))
            });
            Ok(match found {
                Some(event) => Progress::Done(event.note.clone().unwrap_or_default()),
                None => Progress::Pending(format!("{} events", list.items.len())),
            })
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", self.handler.log()))
    }

    /// Placements (start, size) of the MIG instances on the card, from the mock's state.
    pub fn mig_instances(&self) -> Vec<(u32, u32)> {
        let state = self.mock.state().snapshot().unwrap();
        let mut placements: Vec<(u32, u32)> = state
            .gpus
            .values()
            .flat_map(|gpu| {
                gpu.gpu_instances
                    .iter()
                    .map(|gi| (gi.placement.start, gi.placement.size))
            })
            .collect();
        placements.sort();
        placements
    }

    pub fn mig_enabled(&self) -> bool {
        let state = self.mock.state().snapshot().unwrap();
        state.gpus.values().any(|gpu| gpu.mig_current)
    }
}

/// The node before its handler starts, with the real gpu-controller and the validator Pod (see
/// [`PluginNode::start_with_controller`]).
pub async fn setup_with_controller(test: &str, fixture: NamedHost) -> (Setup, ComponentProcess) {
    let s = setup(test, fixture).await;
    let (controller, _) = crate::support::components::start_controller(&s.ns, s.ws.dir.path(), "Debug", true).await;
    let validator = crate::support::components::validator_pod(s.node.name());
    crate::support::create(&s.ns.api::<Pod>(), &validator).await;
    (s, controller)
}

pub fn kubelet_root(s: &Setup) -> PathBuf {
    s.ws.host_root().join("var/lib/kubelet")
}

/// The simulator acting as the kubelet of the cluster's release, with short retries and status
/// syncs for the tests' deadlines.
async fn test_kubelet_options(s: &Setup) -> KubeletSimOptions {
    let minor = s.ns.cluster().server_minor().await.expect("server version");
    KubeletSimOptions {
        backoff_max: Duration::from_secs(4),
        status_sync: Duration::from_secs(2),
        ..KubeletSimOptions::for_release(minor)
    }
}
