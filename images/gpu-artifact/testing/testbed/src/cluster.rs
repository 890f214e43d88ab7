//! Attaching to (or starting) the test bed's control plane.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context, bail};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The control plane of this test run.
///
/// Only the kubeconfig is process-wide: each `#[tokio::test]` has its own runtime, and a client's
/// connection pool must live in the runtime that uses it, so every test builds its own [`Client`].
#[derive(Clone)]
pub struct TestCluster {
    kubeconfig: PathBuf,
    config: Config,
}

static KUBECONFIG: OnceLock<Result<PathBuf, String>> = OnceLock::new();

impl TestCluster {
    /// The cluster named by `GPU_TESTBED_KUBECONFIG`, or one this process starts with
    /// `tools/testbed/cluster-up.sh $K8S` (default 1.34) and that stops when the process exits.
    pub async fn get() -> anyhow::Result<Self> {
        let path = KUBECONFIG
            .get_or_init(|| locate_or_start().map_err(|error| format!("{error:#}")))
            .clone()
            .map_err(anyhow::Error::msg)?;
        let kubeconfig = Kubeconfig::read_from(&path).with_context(|| format!("reading {}", path.display()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Self {
            kubeconfig: path,
            config,
        })
    }

    /// A control plane of `version` of the calling test alone (`name` names its directory), for
    /// tests that stop and restart its servers; it stops when the test process exits.
    pub async fn private(version: &str, name: &str) -> anyhow::Result<Self> {
        let path = start_control_plane(version, name, None)?;
        let kubeconfig = Kubeconfig::read_from(&path).with_context(|| format!("reading {}", path.display()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(Self {
            kubeconfig: path,
            config,
        })
    }

    /// A [`Self::private`] control plane of the shared one's release (`1.34` or `latest`).
    pub async fn private_of_the_shared_release(name: &str) -> anyhow::Result<Self> {
        let shared = Self::get().await?;
        let version = if shared.server_minor().await? <= 34 {
            "1.34"
        } else {
            "latest"
        };
        Self::private(version, name).await
    }

    /// Kills server `component` (`etcd`, `kube-apiserver`, ...) of this control plane with SIGKILL
    /// and starts it again with the same command line after `down`. Only for a [`Self::private`]
    /// control plane: the shared one serves other tests.
    pub fn restart(&self, component: &str, down: std::time::Duration) -> anyhow::Result<()> {
        let dir = self.kubeconfig.parent().context("the control plane's directory")?;
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..");
        let output = Command::new(repo.join("tools/testbed/restart-component.sh"))
            .arg(dir)
            .arg(component)
            .arg("KILL")
            .arg(format!("{:.1}", down.as_secs_f64()))
            .output()
            .context("running tools/testbed/restart-component.sh")?;
        if !output.status.success() {
            bail!(
                "restart-component.sh {component}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(())
    }

    /// Ends the process of server `component` alone with SIGKILL, as a panic ends it, leaving the
    /// test bed's supervisor (`supervise.sh`) to start it again; returns the ended process's id.
    /// Only for a [`Self::private`] control plane.
    pub fn end_server_process(&self, component: &str) -> anyhow::Result<u32> {
        let pid = self
            .server_process(component)?
            .with_context(|| format!("{component} runs no server process"))?;
        Command::new("kill").arg("-KILL").arg(pid.to_string()).status()?;
        Ok(pid)
    }

    /// The process id of server `component` now: the child of its supervisor, if one runs.
    pub fn server_process(&self, component: &str) -> anyhow::Result<Option<u32>> {
        let dir = self.kubeconfig.parent().context("the control plane's directory")?;
        let pids = std::fs::read_to_string(dir.join("pids")).context("reading the test bed's pids")?;
        let supervisor = pids
            .lines()
            .find_map(|line| line.strip_suffix(&format!(" {component}")))
            .with_context(|| format!("{component} is not in the test bed's pids"))?;
        let children = Command::new("pgrep").arg("-P").arg(supervisor).output()?;
        // Not the supervisor's `sleep` between two runs: the child whose program is the server.
        let is_server = |pid: &u32| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|line| {
                let program = line.split(|b| *b == 0).next().unwrap_or_default();
                program.ends_with(format!("/{component}").as_bytes())
            })
        };
        Ok(String::from_utf8_lossy(&children.stdout)
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .find(is_server))
    }

    /// What server `component` and its supervisor logged so far.
    pub fn server_log(&self, component: &str) -> anyhow::Result<String> {
        let dir = self.kubeconfig.parent().context("the control plane's directory")?;
        let path = dir.join("logs").join(format!("{component}.log"));
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// A fresh admin client bound to the calling test's runtime.
    pub fn client(&self) -> Client {
        Client::try_from(self.config.clone()).expect("the test bed kubeconfig makes a client")
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's minor version (34 for 1.34.x): what decides slice layouts and gate defaults.
    pub async fn server_minor(&self) -> anyhow::Result<u32> {
        let info = self.client().apiserver_version().await?;
        let minor: String = info.minor.chars().take_while(char::is_ascii_digit).collect();
        minor
            .parse()
            .with_context(|| format!("server minor version {:?}", info.minor))
    }
}

fn locate_or_start() -> anyhow::Result<PathBuf> {
    if let Ok(path) = std::env::var("GPU_TESTBED_KUBECONFIG") {
        let path = PathBuf::from(path);
        if !path.is_file() {
            bail!("GPU_TESTBED_KUBECONFIG={} does not exist", path.display());
        }
        return Ok(path);
    }
    let version = std::env::var("K8S").unwrap_or_else(|_| "1.34".to_owned());
    start_control_plane(&version, "test", None)
}

/// Starts a control plane of `version` (`1.34` or `latest`) owned by this process (it stops when the
/// process exits), with `gates` instead of the release's DRA gates when given; returns its admin
/// kubeconfig. Its state lives in `<run dir>/<name>-<version>-<pid>`, where the run dir is
/// `GPU_TEST_RUN_DIR` (one per `make test`, outside the checkout) or the system's temporary
/// directory, so no two runs or processes ever share (or stop) one.
pub fn start_control_plane(version: &str, name: &str, gates: Option<&str>) -> anyhow::Result<PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..");
    let run_dir = std::env::var_os("GPU_TEST_RUN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = run_dir.join(format!("{name}-{version}-{}", std::process::id()));
    let mut command = Command::new(repo.join("tools/testbed/cluster-up.sh"));
    command
        .arg(version)
        .env("TESTBED_DIR", &dir)
        .env("TESTBED_OWNER_PID", std::process::id().to_string());
    if let Some(gates) = gates {
        command.env("TESTBED_FEATURE_GATES", gates);
    }
    let output = command.output().context("running tools/testbed/cluster-up.sh")?;
    if !output.status.success() {
        bail!(
            "cluster-up.sh {version} (gates {gates:?}) failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let path = String::from_utf8(output.stdout)?.trim().to_owned();
    Ok(PathBuf::from(path))
}
