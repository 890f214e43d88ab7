//! Running the module's components in e2e tests, under ServiceAccounts bound to the RBAC each
//! component needs (the same rules the module's templates grant).

use std::path::{Path, PathBuf};
use std::time::Duration;

use host_fixtures::ToolStandIns;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use testbed::{Access, ComponentProcess, Progress, ReservedPort, TestNamespace, wait_until};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..")
}

/// Applies every CRD in `crds/` (not the `doc-*` files) and waits until each is Established.
pub async fn install_crds(client: &Client) {
    install_crds_from(client, &repo_root().join("crds")).await;
}

/// Applies every CRD file of `dir` (not the `doc-*` files) and waits until each is Established.
pub async fn install_crds_from(client: &Client, dir: &Path) {
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        if file.starts_with("doc-") || !file.ends_with(".yaml") {
            continue;
        }
        let crd: CustomResourceDefinition = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(&name, &PatchParams::apply("e2e-crds").force(), &Patch::Apply(&crd))
            .await
            .unwrap_or_else(|e| panic!("applying {file}: {e}"));
        wait_until(&format!("CRD {name} Established"), Duration::from_secs(30), || async {
            let crd = crds.get(&name).await?;
            let established = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(if established {
                Progress::Done(())
            } else {
                Progress::Pending("not established".into())
            })
        })
        .await
        .unwrap();
    }
}

pub fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_owned()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..PolicyRule::default()
    }
}

/// What a controller may do with Leases, in its own namespace only (a Role there): create one (a
/// create names no object, so RBAC cannot limit it by name) and read and renew only its own, `name`.
pub fn lease_rules(name: &str) -> Vec<PolicyRule> {
    vec![
        rule("coordination.k8s.io", &["leases"], &["create"]),
        PolicyRule {
            resource_names: Some(vec![name.to_owned()]),
            ..rule("coordination.k8s.io", &["leases"], &["get", "patch"])
        },
    ]
}

/// What gpu-node-agent may do: its node's PhysicalGPUs and labels, and Events.
pub fn node_agent_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            "gpu.deckhouse.io",
            &["physicalgpus"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule("gpu.deckhouse.io", &["physicalgpus/status"], &["get", "patch"]),
        rule("", &["nodes"], &["get", "patch"]),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
    ]
}

/// What gpu-controller may do: for DriverReady read validator Pods and write PhysicalGPU status; for
/// GPUClasses read them, write their status and their DeviceClasses, read slices and claims (its
/// Lease: [`lease_rules`]).
pub fn controller_rules() -> Vec<PolicyRule> {
    vec![
        rule("gpu.deckhouse.io", &["physicalgpus"], &["get", "list", "watch"]),
        rule("gpu.deckhouse.io", &["physicalgpus/status"], &["get", "patch"]),
        rule("", &["pods"], &["get", "list", "watch", "patch"]),
        rule("gpu.deckhouse.io", &["gpuclasses"], &["get", "list", "watch"]),
        rule("gpu.deckhouse.io", &["gpuclasses/status"], &["get", "patch"]),
        rule(
            "resource.k8s.io",
            &["deviceclasses"],
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        rule(
            "resource.k8s.io",
            &["resourceslices", "resourceclaims"],
            &["get", "list", "watch"],
        ),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
    ]
}

/// What gpu-handler may do: read its node's PhysicalGPUs, write their status, publish its node's
/// ResourceSlices, read claims and its Node, publish Events.
pub fn handler_rules() -> Vec<PolicyRule> {
    vec![
        rule("gpu.deckhouse.io", &["physicalgpus"], &["get", "list", "watch"]),
        rule("gpu.deckhouse.io", &["physicalgpus/status"], &["get", "patch"]),
        rule(
            "resource.k8s.io",
            &["resourceslices"],
            &["get", "list", "watch", "create", "patch", "update", "delete"],
        ),
        rule("resource.k8s.io", &["resourceclaims"], &["get"]),
        rule("", &["nodes"], &["get", "list", "watch", "patch"]),
        rule("", &["pods"], &["get", "list", "watch"]),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
    ]
}

/// What gpu-dra-controller may do: read claims, slices, classes, admin DeviceTaintRules and Pods; add the scheduler's
/// finalizer to claims and write their allocations; remove its scheduling gate from Pods; evict
/// Pods for priority preemption (the Eviction API only); record Events (its Lease: [`lease_rules`]).
pub fn dra_controller_rules() -> Vec<PolicyRule> {
    vec![
        rule("resource.k8s.io", &["resourceclaims"], &["get", "list", "watch"]),
        rule(
            "resource.k8s.io",
            &["resourceclaims/status", "resourceclaims/binding"],
            &["update", "patch"],
        ),
        rule("resource.k8s.io", &["resourceclaims"], &["patch"]),
        rule(
            "resource.k8s.io",
            &["resourceslices", "deviceclasses"],
            &["get", "list", "watch"],
        ),
        rule("resource.k8s.io", &["devicetaintrules"], &["get", "list", "watch"]),
        rule("resource.k8s.io", &["resourceclaimtemplates"], &["get"]),
        rule("", &["pods"], &["get", "list", "watch", "patch"]),
        rule("", &["pods/eviction"], &["create"]),
        rule("", &["pods/status"], &["patch"]),
        rule("", &["nodes"], &["get", "list", "watch"]),
        rule("gpu.deckhouse.io", &["physicalgpus"], &["get", "list", "watch"]),
        rule("events.k8s.io", &["events"], &["create", "patch"]),
        rule("", &["events"], &["patch"]),
    ]
}

/// A loopback port held for the component that will listen on it (see [`ReservedPort`]).
pub fn reserve_port() -> ReservedPort {
    ReservedPort::new().expect("a loopback port")
}

/// A fixture host, the agent's uevent socket and its logs, in one temporary directory.
pub struct AgentWorkspace {
    pub dir: tempfile::TempDir,
}

impl AgentWorkspace {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    pub fn host_root(&self) -> PathBuf {
        self.dir.path().join("host")
    }
    pub fn socket(&self) -> PathBuf {
        self.dir.path().join("uevent.sock")
    }
    pub fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }
}

/// Starts gpu-node-agent for `node` on the workspace's fixture host with `kubeconfig`; returns the
/// process and its health port.
pub fn start_agent(ws: &AgentWorkspace, node: &str, kubeconfig: &Path) -> (ComponentProcess, u16) {
    let reserved = reserve_port();
    let port = reserved.number();
    let env = [
        ("NODE_NAME", node.to_owned()),
        ("HOST_ROOT", ws.host_root().display().to_string()),
        ("UEVENT_SOURCE", format!("socket:{}", ws.socket().display())),
        ("HEALTH_ADDR", format!("127.0.0.1:{port}")),
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("LOG_LEVEL", "Debug".to_owned()),
    ];
    let agent = ComponentProcess::start("gpu-node-agent", &env, &ws.logs()).unwrap();
    (agent.holding(reserved), port)
}

/// Starts gpu-handler for `node`, loading NVML from `nvml_library`, re-reading it every second (so a
/// change made behind the handler's back shows within the tests' deadlines); returns the process and
/// its health port.
pub fn start_handler(
    ws: &AgentWorkspace,
    node: &str,
    kubeconfig: &Path,
    nvml_library: &Path,
) -> (ComponentProcess, u16) {
    start_handler_with(ws, node, kubeconfig, nvml_library, &[])
}

/// The settings a crash or outage test gives gpu-handler: the tool stand-ins for `nvidia-smi` and the
/// MPS control, MPS supervised every second, and, when `faults` is not empty, the fault points to
/// die at and the file the handler writes when it reaches one.
pub fn handler_fault_env(tools: &ToolStandIns, reached: &Path, faults: &str) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("NVIDIA_SMI", tools.nvidia_smi().display().to_string()),
        ("NVIDIA_MPS_CONTROL", tools.mps_control().display().to_string()),
        ("MPS_SUPERVISE_INTERVAL", "1s".to_owned()),
    ];
    if !faults.is_empty() {
        env.push(("GPU_HANDLER_FAULT_POINT", faults.to_owned()));
        env.push(("GPU_HANDLER_FAULT_REACHED", reached.display().to_string()));
    }
    env
}

/// [`start_handler`] with `extra` settings on top (a test-only fault point, say). Its kubelet root,
/// host root and CDI directory are inside the workspace's fixture host.
pub fn start_handler_with(
    ws: &AgentWorkspace,
    node: &str,
    kubeconfig: &Path,
    nvml_library: &Path,
    extra: &[(&str, String)],
) -> (ComponentProcess, u16) {
    let reserved = reserve_port();
    let port = reserved.number();
    let host = ws.host_root();
    let mut env = vec![
        ("NODE_NAME", node.to_owned()),
        ("NVML_LIBRARY", nvml_library.display().to_string()),
        ("NVML_RESYNC_INTERVAL", "1s".to_owned()),
        ("HOST_ROOT", host.display().to_string()),
        ("KUBELET_ROOT", host.join("var/lib/kubelet").display().to_string()),
        ("CDI_DIR", host.join("var/run/cdi").display().to_string()),
        ("HEALTH_ADDR", format!("127.0.0.1:{port}")),
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("LOG_LEVEL", "Debug".to_owned()),
    ];
    env.extend(extra.iter().cloned());
    let handler = ComponentProcess::start("gpu-handler", &env, &ws.logs()).unwrap();
    (handler.holding(reserved), port)
}

/// Starts (or starts again) controller `name` of the module with `kubeconfig`, its Lease and Pod
/// namespace `ns`, and `extra` environment (the chart's switches); returns once it is ready, with
/// its health (and metrics) port.
pub async fn launch_controller(
    ns: &TestNamespace,
    ws: &AgentWorkspace,
    name: &str,
    kubeconfig: &Path,
    extra: &[(&'static str, String)],
) -> (ComponentProcess, u16) {
    let reserved = reserve_port();
    let port = reserved.number();
    let mut env = vec![
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("POD_NAMESPACE", ns.name().to_owned()),
        ("POD_NAME", format!("{name}-0")),
        ("HEALTH_ADDR", format!("127.0.0.1:{port}")),
        ("LOG_LEVEL", "Debug".to_owned()),
    ];
    env.extend(extra.iter().cloned());
    let process = ComponentProcess::start(name, &env, &ws.logs())
        .unwrap()
        .holding(reserved);
    wait_ready(port, &process).await;
    (process, port)
}

/// Waits until the component on `port` answers /readyz with 200.
pub async fn wait_ready(port: u16, process: &ComponentProcess) {
    wait_until(
        &format!("{} ready on :{port}", process.name()),
        Duration::from_secs(30),
        || async {
            let ready = std::process::Command::new("curl")
                .args(["-fsS", "--max-time", "1", &format!("http://127.0.0.1:{port}/readyz")])
                .output()?
                .status
                .success();
            Ok(if ready {
                Progress::Done(())
            } else {
                Progress::Pending(process.log().lines().last().unwrap_or("").to_owned())
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- {} log ---\n{}", process.name(), process.log()));
}

/// Sends raw uevent payloads to the agent's socket, as the kernel would broadcast them.
pub fn send_uevents(socket: &Path, payloads: &[Vec<u8>]) {
    let sender = std::os::unix::net::UnixDatagram::unbound().unwrap();
    for payload in payloads {
        sender.send_to(payload, socket).unwrap();
    }
}

/// Starts gpu-controller under its RBAC with its files in `dir`: validator Pods of `ns` speak for
/// DriverReady, its Lease lives in `ns`, and, with `only_the_tests_classes`, it renders only the
/// GPUClasses labelled for `ns` (tests share the cluster, each with a controller of its own; the demo
/// has a cluster to itself); returns the process and its health port.
pub async fn start_controller(
    ns: &TestNamespace,
    dir: &Path,
    log_level: &str,
    only_the_tests_classes: bool,
) -> (ComponentProcess, u16) {
    let kubeconfig = kubeconfig_with_lease(ns, "gpu-controller", controller_rules(), dir).await;
    let reserved = reserve_port();
    let port = reserved.number();
    let env = [
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("VALIDATOR_NAMESPACE", ns.name().to_owned()),
        ("VALIDATOR_SELECTOR", "app=gpu-driver-validator".to_owned()),
        (
            "GPUCLASS_SELECTOR",
            match only_the_tests_classes {
                true => format!("{}={}", testbed::OWNER_LABEL, ns.name()),
                false => String::new(),
            },
        ),
        ("POD_NAMESPACE", ns.name().to_owned()),
        ("POD_NAME", "gpu-controller-0".to_owned()),
        ("HEALTH_ADDR", format!("127.0.0.1:{port}")),
        ("LOG_LEVEL", log_level.to_owned()),
    ];
    let controller = ComponentProcess::start("gpu-controller", &env, &dir.join("logs")).unwrap();
    (controller.holding(reserved), port)
}

/// A driver-validator Pod bound to `node`: the simulated kubelet runs it and reports it Ready, which
/// gpu-controller turns into DriverReady=True on the node's PhysicalGPUs.
pub fn validator_pod(node: &str) -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("gpu-driver-validator-{node}"), "labels": {"app": "gpu-driver-validator"}},
        "spec": {"nodeName": node, "containers": [{"name": "validator", "image": "registry.invalid/gpu/validator:test"}]},
    }))
    .unwrap()
}

/// A kubeconfig for controller `account` of `ns`: bound cluster-wide to `rules`, and in `ns` (where
/// its Lease lives, as `d8-gpu` for the chart) to [`lease_rules`].
pub async fn kubeconfig_with_lease(ns: &TestNamespace, account: &str, rules: Vec<PolicyRule>, dir: &Path) -> PathBuf {
    let access = Access::ClusterAndNamespaced(rules, lease_rules(account));
    ns.kubeconfig_as(account, access, dir).await.unwrap()
}

/// A kubeconfig for a ServiceAccount of `ns` bound (cluster-wide) to `rules`.
pub async fn kubeconfig_for(ns: &TestNamespace, account: &str, rules: Vec<PolicyRule>, dir: &Path) -> PathBuf {
    ns.kubeconfig_as(account, Access::Cluster(rules), dir).await.unwrap()
}
