//! The real gpu-handler killed with SIGKILL in the middle of its work, for every mode, through the
//! real scheduler and the kubelet simulator: the handler stops at a fault point (the same points
//! as the in-process crash matrix of `node-prepare/tests/crash_matrix.rs`, which covers every
//! point of every mode), the test kills the process, starts a new one, and the kubelet's retries
//! finish the job. Afterwards the claim is prepared once, and once the Pod is gone nothing is left:
//! no checkpoint entry, CDI spec, MIG instance, MPS daemon, time slice or vfio-pci binding.

mod handler_node;
mod plugin_node;
mod support;

use std::path::PathBuf;
use std::time::Duration;

use host_fixtures::{KernelEmulator, NamedHost, ToolStandIns};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use plugin_node::PluginNode;
use serde_json::json;
use support::components::{handler_fault_env, start_handler_with};
use support::*;
use testbed::{Progress, wait_until};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Physical,
    Mig,
    Mps,
    TimeSlicing,
    Vfio,
}

/// A node for `mode`, its handler started with `faults`; the stand-in tools, and for VFIO the
/// kernel's binding emulated.
struct CrashNode {
    node: PluginNode,
    tools: ToolStandIns,
    marker: PathBuf,
    mode: Mode,
    _kernel: Option<KernelEmulator>,
}

impl CrashNode {
    async fn start(test: &str, mode: Mode, faults: &str) -> Self {
        let s = handler_node::setup(test, NamedHost::A30Pcie).await;
        s.set_driver_ready("True").await;
        let tools = ToolStandIns::install(&s.host);
        let marker = s.ws.dir.path().join("fault-point-reached");
        let node = PluginNode::launch(s, &handler_fault_env(&tools, &marker, faults)).await;
        let label = match mode {
            Mode::Mps => Some("gpu.deckhouse.io/allow-mps"),
            Mode::TimeSlicing => Some("gpu.deckhouse.io/allow-timeslicing"),
            _ => None,
        };
        if let Some(label) = label {
            Api::<Node>::all(node.s.ns.client())
                .patch(
                    node.s.node.name(),
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {label: "true"}}})),
                )
                .await
                .unwrap();
        }
        let kernel =
            (mode == Mode::Vfio).then(|| KernelEmulator::start_with_uevents(node.s.host.clone(), node.s.ws.socket()));
        let crash = Self {
            node,
            tools,
            marker,
            mode,
            _kernel: kernel,
        };
        crash.template().await;
        crash
    }

    /// The ResourceClaimTemplate `job` of the mode.
    async fn template(&self) {
        let ns = &self.node.s.ns;
        let (expression, percent) = match self.mode {
            Mode::Physical | Mode::Vfio => (
                r#"device.attributes["gpu.deckhouse.io"].deviceType == "Physical" && device.attributes["gpu.deckhouse.io"].sharing == "Exclusive""#,
                None,
            ),
            Mode::Mig => (
                r#"device.attributes["gpu.deckhouse.io"].deviceType == "MIG" && device.attributes["gpu.deckhouse.io"].migProfile == "2g.12gb""#,
                None,
            ),
            Mode::Mps => (r#"device.attributes["gpu.deckhouse.io"].sharing == "MPS""#, Some(50)),
            Mode::TimeSlicing => (
                r#"device.attributes["gpu.deckhouse.io"].sharing == "TimeSlicing""#,
                Some(50),
            ),
        };
        let expression = format!(r#"device.driver == "gpu.deckhouse.io" && {expression}"#);
        let class = match self.mode {
            Mode::Vfio => vfio_class(ns, "job", &expression),
            _ => device_class(ns, "job", &expression, None),
        };
        create(&Api::<DeviceClass>::all(ns.client()), &class).await;
        let mut exactly = json!({"deviceClassName": class.metadata.name});
        if let Some(percent) = percent {
            exactly["capacity"] = json!({"requests": {"gpu.deckhouse.io/sharePercent": percent.to_string()}});
        }
        one_request_template(ns, "job", exactly, None).await;
        if self.mode != Mode::Physical && self.mode != Mode::Vfio {
            self.node
                .wait_offered(if self.mode == Mode::Mps {
                    "gpu0-mps"
                } else if self.mode == Mode::TimeSlicing {
                    "gpu0-timeslicing"
                } else {
                    "gpu0-mig-2g12gb-0"
                })
                .await;
        }
    }

    /// Waits until the handler stopped at its fault point, then kills it with SIGKILL.
    async fn kill_at_fault_point(&mut self, what: &str) {
        let marker = self.marker.clone();
        let handler = &self.node.handler;
        wait_until(
            &format!("the handler to stop at {what}"),
            Duration::from_secs(90),
            || async {
                Ok(match std::fs::read_to_string(&marker) {
                    Ok(point) => Progress::Done(point),
                    Err(_) => Progress::Pending(handler.log().lines().last().unwrap_or_default().to_owned()),
                })
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", self.node.handler.log()));
        self.node.handler.kill();
        std::fs::remove_file(&self.marker).unwrap();
    }

    /// A new handler process on the node, with `faults`.
    fn restart(&mut self, faults: &str) {
        let s = &self.node.s;
        let env = handler_fault_env(&self.tools, &self.marker, faults);
        let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (*k, v.clone())).collect();
        self.node.handler = start_handler_with(
            &s.ws,
            s.node.name(),
            &s.handler_kubeconfig,
            &self.node.mock.library_path(),
            &env,
        )
        .0;
    }

    async fn uid_of(&self, pod: &str) -> String {
        let prepared = self.node.wait_prepared(pod).await;
        let claim = prepared.keys().next().unwrap().clone();
        self.node
            .s
            .ns
            .api::<ResourceClaim>()
            .get(&claim)
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap()
    }

    fn uuid(&self) -> String {
        "GPU-010a3000-0000-4000-8000-a30000000001".to_owned()
    }

    /// The claim is prepared exactly once: one checkpoint entry, one CDI spec of its devices (beside
    /// it, on 1.36+, the KEP-5304 device-metadata spec of its request), its mode's devices.
    async fn assert_prepared_once(&self, pod: &str) {
        let uid = self.uid_of(pod).await;
        let node = &self.node;
        assert_eq!(node.checkpointed_claims(), vec![uid.clone()]);
        assert_eq!(node.checkpoint()["data"]["claims"][&uid]["state"], "PrepareCompleted");
        let cdi: Vec<String> = std::fs::read_dir(node.host().join("var/run/cdi"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|file| !file.starts_with("gpu.deckhouse.io_metadata_"))
            .collect();
        assert_eq!(
            cdi,
            [format!("gpu.deckhouse.io-claim_{uid}.json")],
            "one CDI spec of the devices"
        );
        assert_eq!(
            node.mig_instances().len(),
            usize::from(self.mode == Mode::Mig),
            "MIG instances"
        );
        assert_eq!(
            self.tools.mps_daemon_running(&self.uuid()),
            self.mode == Mode::Mps,
            "MPS daemon"
        );
        if self.mode == Mode::TimeSlicing {
            assert_eq!(
                self.tools.time_slice(&self.uuid()),
                Some(0),
                "the share's (Default) time slice was set"
            );
        }
        let driver = std::fs::read_link(node.host().join("sys/bus/pci/devices/0000:01:00.0/driver")).unwrap();
        let on_vfio = driver.file_name().unwrap() == "vfio-pci";
        assert_eq!(on_vfio, self.mode == Mode::Vfio, "vfio-pci binding");
    }

    async fn delete_and_assert_clean(&self, pod: &str) {
        self.node
            .s
            .ns
            .api::<Pod>()
            .delete(pod, &DeleteParams::default())
            .await
            .unwrap();
        self.node.wait_pod_gone(pod).await;
        self.assert_clean();
    }

    fn assert_clean(&self) {
        let node = &self.node;
        assert!(node.checkpointed_claims().is_empty(), "{}", node.checkpoint());
        assert!(
            node.checkpoint()["data"].get("migEnabledByNode").is_none(),
            "{}",
            node.checkpoint()
        );
        let cdi: Vec<_> = std::fs::read_dir(node.host().join("var/run/cdi"))
            .into_iter()
            .flatten()
            .collect();
        assert!(cdi.is_empty(), "{cdi:?}");
        assert!(node.mig_instances().is_empty());
        assert!(!node.mig_enabled());
        assert!(!self.tools.mps_daemon_running(&self.uuid()));
        assert!(matches!(self.tools.time_slice(&self.uuid()), None | Some(0)));
        let driver = std::fs::read_link(node.host().join("sys/bus/pci/devices/0000:01:00.0/driver")).unwrap();
        assert_eq!(driver.file_name().unwrap(), "nvidia");
    }

    /// Kill during a prepare at `point`; the restarted handler and the kubelet's retry prepare once.
    async fn kill_in_prepare(&mut self, pod: &str, point: &str) {
        create(
            &self.node.s.ns.api::<Pod>(),
            &templated_pod(pod, self.node.s.node.name(), "job"),
        )
        .await;
        self.kill_at_fault_point(point).await;
        self.restart("");
        self.assert_prepared_once(pod).await;
        self.delete_and_assert_clean(pod).await;
    }

    /// Kill during the unprepare of a prepared Pod at `point` (the running handler has it armed).
    async fn kill_in_unprepare(&mut self, pod: &str, point: &str) {
        create(
            &self.node.s.ns.api::<Pod>(),
            &templated_pod(pod, self.node.s.node.name(), "job"),
        )
        .await;
        self.assert_prepared_once(pod).await;
        self.node
            .s
            .ns
            .api::<Pod>()
            .delete(pod, &DeleteParams::default())
            .await
            .unwrap();
        self.kill_at_fault_point(point).await;
        self.restart("");
        self.node.wait_pod_gone(pod).await;
        self.assert_clean();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_card_prepare_killed_after_it_was_recorded_is_answered_from_the_checkpoint() {
    let point = "prepare/after/record-prepare-completed";
    let mut node = CrashNode::start("crash-physical", Mode::Physical, point).await;
    node.kill_in_prepare("job", point).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mig_prepare_and_unprepare_killed_halfway_leave_one_instance_then_none() {
    let made = "prepare/inside/create-devices/mig-device-made";
    let destroyed = "unprepare/after/destroy-mig-devices";
    let mut node = CrashNode::start("crash-mig", Mode::Mig, made).await;
    node.kill_in_prepare("job-a", made).await;
    node.node.handler.kill();
    node.restart(destroyed);
    node.kill_in_unprepare("job-b", destroyed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mps_prepare_killed_after_the_daemon_started_leaves_one_daemon() {
    let point = "prepare/after/apply-sharing";
    let mut node = CrashNode::start("crash-mps", Mode::Mps, point).await;
    node.kill_in_prepare("job", point).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconciliation_killed_while_rolling_back_a_timeslicing_share_is_finished_by_the_next_start() {
    let mut node = CrashNode::start("crash-timeslicing", Mode::TimeSlicing, "prepare/after/write-cdi-spec").await;
    create(
        &node.node.s.ns.api::<Pod>(),
        &templated_pod("job", node.node.s.node.name(), "job"),
    )
    .await;
    node.kill_at_fault_point("prepare/after/write-cdi-spec").await;
    node.restart("rollback/after/undo-sharing");
    node.kill_at_fault_point("rollback/after/undo-sharing").await;
    node.restart("");
    node.assert_prepared_once("job").await;
    node.delete_and_assert_clean("job").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vfio_prepare_and_unprepare_killed_between_driver_moves_give_the_card_back() {
    let moved = "prepare/inside/bind-vfio/function-moved";
    let given_back = "unprepare/after/give-back-vfio";
    let mut node = CrashNode::start("crash-vfio", Mode::Vfio, moved).await;
    node.kill_in_prepare("vm-a", moved).await;
    node.node.handler.kill();
    node.restart(given_back);
    node.kill_in_unprepare("vm-b", given_back).await;
}
