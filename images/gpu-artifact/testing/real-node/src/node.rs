//! The running real node, for tests and the demo: `GPU_REALNODE_ENV` names the env file node-up.sh
//! printed (what `make test` exports), else the first test of a process starts a node for it (owned
//! by the process: it stops when the process ends). Steps inside the node (restart the kubelet,
//! reboot) go through tools/testbed/node-exec.sh.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::OnceCell;

use crate::node_files::NodeFiles;

pub const ENV_FILE_VAR: &str = "GPU_REALNODE_ENV";

pub struct RealNode {
    pub name: String,
    /// The node's directory: logs, configs, the control plane's state.
    pub dir: PathBuf,
    /// The fixture host (what the node shows as /sys, /proc/driver, /usr).
    pub host: PathBuf,
    /// The node's init, as the machine numbers it (its namespaces are the node's).
    pub pid: u32,
    pub kubeconfig: PathBuf,
    pub k8s_version: String,
}

static NODE: OnceCell<RealNode> = OnceCell::const_new();

/// The repository's root (tools/testbed lives there).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..")
}

impl RealNode {
    pub async fn get() -> anyhow::Result<&'static RealNode> {
        NODE.get_or_try_init(|| async { tokio::task::spawn_blocking(attach_or_start).await? })
            .await
    }

    pub async fn client(&self) -> anyhow::Result<Client> {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(&self.kubeconfig)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        Ok(Client::try_from(config)?)
    }

    /// The node's own filesystem view (its /dev, /run, /var/lib/kubelet), symlinks resolved inside
    /// the node.
    pub fn files(&self) -> NodeFiles {
        NodeFiles::of_process(self.pid)
    }

    /// Runs a command inside the node's namespaces.
    pub fn exec(&self, command: &[&str]) -> anyhow::Result<Output> {
        Ok(Command::new(repo_root().join("tools/testbed/node-exec.sh"))
            .arg(&self.dir)
            .args(command)
            .output()?)
    }

    /// A step of node/node-inside.sh (`restart-kubelet`, `reboot`), failing with its output.
    pub fn step(&self, step: &str) -> anyhow::Result<()> {
        let script = repo_root().join("tools/testbed/node/node-inside.sh");
        let out = self.exec(&[&script.display().to_string(), &self.dir.display().to_string(), step])?;
        if !out.status.success() {
            bail!(
                "node step {step} ({}): {}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

fn attach_or_start() -> anyhow::Result<RealNode> {
    let env_file = match std::env::var_os(ENV_FILE_VAR) {
        Some(file) => PathBuf::from(file),
        None => start_for_this_process()?,
    };
    let text = std::fs::read_to_string(&env_file).with_context(|| format!("read {}", env_file.display()))?;
    let env: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let get = |key: &str| {
        env.get(key)
            .map(|v| v.to_string())
            .with_context(|| format!("{key} in {}", env_file.display()))
    };
    Ok(RealNode {
        name: get("NODE_NAME")?,
        dir: get("NODE_DIR")?.into(),
        host: get("NODE_HOST")?.into(),
        pid: get("NODE_PID")?.parse()?,
        kubeconfig: get("KUBECONFIG")?.into(),
        k8s_version: get("K8S_VERSION")?,
    })
}

fn start_for_this_process() -> anyhow::Result<PathBuf> {
    let base = std::env::var_os("GPU_TEST_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("realnode-{}", std::process::id()));
    let out = Command::new(repo_root().join("tools/testbed/node-up.sh"))
        .arg(std::env::var("K8S").unwrap_or_else(|_| "1.34".into()))
        .env("NODE_DIR", &dir)
        .env("TESTBED_OWNER_PID", std::process::id().to_string())
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !out.status.success() {
        bail!(
            "tools/testbed/node-up.sh failed ({}); logs in {}",
            out.status,
            dir.display()
        );
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// Waits until Node `name` is Ready, failing with its conditions when `seconds` pass (KUBECONFIG).
/// Deckhouse's label of a node of its system NodeGroup.
pub const SYSTEM_ROLE_LABEL: &str = "node-role.deckhouse.io/system";

/// What gpu-detect-node.sh (templates/node-configuration) labels a node whose containerd has CDI on.
pub const CDI_LABEL: &str = "gpu.deckhouse.io/cdi";
/// What gpu-detect-node.sh labels a node with an NVIDIA GPU on PCI (the fixture host has nine).
pub const NVIDIA_GPU_LABEL: &str = "gpu.deckhouse.io/nvidia-gpu";

/// Waits until the Node is Ready, then labels it a Deckhouse system node with CDI on.
pub fn wait_node_ready_blocking(name: &str, seconds: u64) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let nodes = Api::<Node>::all(Client::try_default().await?);
        let deadline = Instant::now() + Duration::from_secs(seconds);
        let mut seen = String::from("no Node yet");
        while Instant::now() < deadline {
            if let Ok(node) = nodes.get(name).await {
                let conditions = node.status.and_then(|s| s.conditions).unwrap_or_default();
                if conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True") {
                    // What Deckhouse gives a node before the module runs (a kubelet may not set these
                    // labels itself): its system node role (the module's controllers run on system
                    // nodes, its node components on every node but the control plane, so the one node
                    // is both), and the labels bashible's run of the module's gpu-detect-node.sh sets
                    // where the node has NVIDIA GPUs and the running containerd has CDI on
                    // (write-configs.sh turns it on).
                    let label = serde_json::json!({"metadata": {"labels": {
                        SYSTEM_ROLE_LABEL: "", CDI_LABEL: "true", NVIDIA_GPU_LABEL: "true"}}});
                    nodes
                        .patch(name, &PatchParams::default(), &Patch::Merge(&label))
                        .await?;
                    return Ok(());
                }
                seen = conditions
                    .iter()
                    .map(|c| format!("{}={} ({})", c.type_, c.status, c.message.clone().unwrap_or_default()))
                    .collect::<Vec<_>>()
                    .join("; ");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        bail!("Node {name} not Ready after {seconds}s; last seen: {seen}")
    })
}
