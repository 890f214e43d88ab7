//! The kubelet-plugin half of the handler's settings, from the DaemonSet's environment.
//!
//! - `HOST_ROOT` (default `/`): the host's root, for `/proc/driver/nvidia` and the boot id;
//! - `KUBELET_ROOT` (default `/var/lib/kubelet`): the plugin and registration sockets, the node
//!   lock and the checkpoint live below it;
//! - `CDI_DIR` (default `/var/run/cdi`): where per-claim CDI specs are written;
//! - `MIG_OFFERS` (`true` or `false`, default `true`): the module-wide switch for MIG offers (the
//!   Node label `gpu.deckhouse.io/allow-mig=false` switches them off per node);
//! - `NVIDIA_SMI` (default `nvidia-smi`, looked up in the handler's `PATH`): the tool that sets a
//!   time-sliced card's time slice; point it at the driver root's binary (e.g.
//!   `/run/nvidia/driver/usr/bin/nvidia-smi`) where the image does not carry one;
//! - `NVIDIA_MPS_CONTROL` (default `nvidia-cuda-mps-control`, looked up in `PATH`): starts and stops
//!   the MPS control daemon of a card shared with MPS; the same advice applies;
//! - `DRIVER_ROOT_CTR_PATH` and `DRIVER_ROOT` (both or neither): where this container sees the
//!   driver root and where the host has it (`nvidiaDriverRoot`); with them every GPU container's CDI
//!   spec mounts the driver's libraries and tools and runs the ld cache hook;
//! - `CDI_HOOK_SOURCE` (default `/app/gpu-cdi-hook`): the hook binary, copied at start next to the
//!   DRA socket, where the runtime on the host can run it;
//! - `MPS_SHM_NAMESPACE` (`true` or `false`, default `false`): each MPS daemon gets its card's
//!   shared-memory directory as `/dev/shm` (this binary, as `mps-namespace`, starts it in a mount
//!   namespace), shared with its clients through their CDI specs; that directory is then a tmpfs
//!   the handler mounts while the daemon runs (never the node's disk);
//! - `MPS_SHM_SIZE` (default `1Gi`; a number of bytes, or with `Ki`, `Mi` or `Gi`): the size of that
//!   tmpfs, the most the MPS clients of one card (one namespace's, see `node_prepare`) may keep in
//!   `/dev/shm` together; a write past it fails with ENOSPC;
//! - `MPS_SUPERVISE_INTERVAL` (default `5s`): how often the MPS daemons of cards with prepared MPS
//!   shares are checked and started again if they died;
//! - `MPS_STATIC_POD_DIR` with `MPS_DAEMON_IMAGE` and `POD_NAMESPACE` (and `DRIVER_ROOT`): each
//!   card's MPS daemon runs as a static Pod of the kubelet, whose `staticPodPath` is that directory,
//!   of that image, in that namespace (`node_prepare` `mps_static_pod`), apart from this container.
//!
//! The pipeline's time limits (tool runs, sysfs writes, vendor calls) are checked at start to end
//! inside the node lock's wait.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use kubelet_plugin::{DEFAULT_KUBELET_ROOT, DRIVER_NAME, PluginConfig};
use node_prepare::{DriverFiles, MpsStaticPods, NodePrepareConfig};

#[derive(Debug, Clone, PartialEq)]
pub struct NodePluginConfig {
    pub host_root: PathBuf,
    pub kubelet_root: PathBuf,
    pub cdi_dir: PathBuf,
    pub mig_offers: bool,
    pub nvidia_smi: PathBuf,
    pub mps_control: PathBuf,
    /// (in this container, on the host)
    pub driver_root: Option<(PathBuf, PathBuf)>,
    pub cdi_hook_source: PathBuf,
    pub mps_shm_namespace: bool,
    pub mps_shm_bytes: u64,
    pub mps_supervise_interval: Duration,
    pub mps_static_pods: Option<MpsStaticPods>,
}

impl NodePluginConfig {
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let path =
            |key: &str, default: &str| PathBuf::from(get(key).filter(|v| !v.is_empty()).unwrap_or(default.into()));
        let switch = |key: &str, default: bool| match get(key).as_deref().map(str::trim) {
            None | Some("") => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(other) => bail!("{key} must be true or false, not {other:?}"),
        };
        let mig_offers = switch("MIG_OFFERS", true)?;
        let driver_root: Option<(PathBuf, PathBuf)> = match (get("DRIVER_ROOT_CTR_PATH"), get("DRIVER_ROOT")) {
            (Some(here), Some(host)) if !here.is_empty() && !host.is_empty() => Some((here.into(), host.into())),
            (None, None) => None,
            _ => bail!("DRIVER_ROOT_CTR_PATH and DRIVER_ROOT go together: set both or neither"),
        };
        let mps_supervise_interval = match get("MPS_SUPERVISE_INTERVAL").as_deref().map(str::trim) {
            None | Some("") => Duration::from_secs(5),
            Some(text) => parse_seconds(text)
                .filter(|interval| !interval.is_zero())
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "MPS_SUPERVISE_INTERVAL must be a positive number of seconds such as 5s, not {text:?}"
                    )
                })?,
        };
        let mps_shm_bytes = match get("MPS_SHM_SIZE").as_deref().map(str::trim) {
            None | Some("") => DEFAULT_MPS_SHM_BYTES,
            Some(text) => parse_bytes(text).filter(|bytes| *bytes > 0).ok_or_else(|| {
                anyhow::anyhow!("MPS_SHM_SIZE must be a positive size such as 1Gi, 512Mi or 1048576, not {text:?}")
            })?,
        };
        let mps_static_pods = match (get("MPS_STATIC_POD_DIR").filter(|d| !d.is_empty()), &driver_root) {
            (None, _) => None,
            (Some(dir), Some((_, host))) => {
                let needed = |key: &str| {
                    get(key).filter(|v| !v.is_empty()).ok_or_else(|| {
                        anyhow::anyhow!("MPS_STATIC_POD_DIR needs {key}: the MPS daemons' static Pods name it")
                    })
                };
                Some(MpsStaticPods {
                    dir: dir.into(),
                    image: needed("MPS_DAEMON_IMAGE")?,
                    namespace: needed("POD_NAMESPACE")?,
                    driver_root: host.clone(),
                    start_timeout: MpsStaticPods::DEFAULT_START_TIMEOUT,
                })
            }
            (Some(_), None) => bail!("MPS_STATIC_POD_DIR needs DRIVER_ROOT: the MPS daemons run the driver's tool"),
        };
        let config = Self {
            host_root: path("HOST_ROOT", "/"),
            kubelet_root: path("KUBELET_ROOT", DEFAULT_KUBELET_ROOT),
            cdi_dir: path("CDI_DIR", "/var/run/cdi"),
            mig_offers,
            nvidia_smi: path("NVIDIA_SMI", "nvidia-smi"),
            mps_control: path("NVIDIA_MPS_CONTROL", "nvidia-cuda-mps-control"),
            driver_root,
            cdi_hook_source: path("CDI_HOOK_SOURCE", "/app/gpu-cdi-hook"),
            mps_shm_namespace: switch("MPS_SHM_NAMESPACE", false)?,
            mps_shm_bytes,
            mps_supervise_interval,
            mps_static_pods,
        };
        if let Err(reason) = config.prepare("-", None, None).check_bounds() {
            bail!("the node pipeline's time limits: {reason}");
        }
        Ok(config)
    }

    /// Where the hook is copied: next to the DRA socket, a path the host shares with this container.
    pub fn cdi_hook(&self) -> PathBuf {
        self.plugin_dir().join("gpu-cdi-hook")
    }

    /// Copies the hook binary to [`Self::cdi_hook`] (replacing the previous one atomically); `None`
    /// when this image carries none (the simulated nodes' processes).
    pub fn install_cdi_hook(&self) -> anyhow::Result<Option<PathBuf>> {
        if !self.cdi_hook_source.is_file() {
            return Ok(None);
        }
        let target = self.cdi_hook();
        std::fs::create_dir_all(self.plugin_dir())?;
        let temporary = target.with_extension("new");
        std::fs::copy(&self.cdi_hook_source, &temporary)?;
        std::fs::set_permissions(&temporary, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
        std::fs::rename(&temporary, &target)?;
        Ok(Some(target))
    }

    fn plugin_dir(&self) -> PathBuf {
        self.plugin()
            .dra_socket()
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default()
    }

    pub fn plugin(&self) -> PluginConfig {
        PluginConfig {
            driver_name: DRIVER_NAME.to_owned(),
            kubelet_root: self.kubelet_root.clone(),
        }
    }

    /// The prepare pipeline keeps its lock and checkpoint beside the DRA socket. `hook` is where
    /// [`Self::install_cdi_hook`] put the hook; `launcher` is this binary (the MPS namespace).
    pub fn prepare(&self, node_name: &str, hook: Option<PathBuf>, launcher: Option<PathBuf>) -> NodePrepareConfig {
        NodePrepareConfig {
            plugin_dir: self.plugin_dir(),
            driver: self.driver_root.as_ref().map(|(here, host)| DriverFiles {
                root_here: here.clone(),
                root_on_host: host.clone(),
                ld_cache_hook: hook,
            }),
            mps_launcher: launcher.filter(|_| self.mps_shm_namespace),
            mps_shm_bytes: self.mps_shm_namespace.then_some(self.mps_shm_bytes),
            cdi_dir: self.cdi_dir.clone(),
            lock_timeout: Duration::from_secs(10),
            nvidia_smi: self.nvidia_smi.clone(),
            mps_control: self.mps_control.clone(),
            mps_static_pods: self.mps_static_pods.clone(),
            ..NodePrepareConfig::new(node_name, &self.host_root)
        }
    }
}

/// The size of a card's MPS `/dev/shm` when `MPS_SHM_SIZE` is not set.
const DEFAULT_MPS_SHM_BYTES: u64 = 1 << 30;

/// `1048576`, `1024Ki`, `1Mi` or `1Gi` (binary units, as Kubernetes writes quantities).
fn parse_bytes(text: &str) -> Option<u64> {
    let (number, shift) = [("Ki", 10), ("Mi", 20), ("Gi", 30)]
        .into_iter()
        .find_map(|(suffix, shift)| text.strip_suffix(suffix).map(|number| (number, shift)))
        .unwrap_or((text, 0));
    number.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// `5s` or `5` (seconds).
fn parse_seconds(text: &str) -> Option<Duration> {
    text.strip_suffix('s')
        .unwrap_or(text)
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
#[path = "node_plugin_config_tests.rs"]
mod tests;
