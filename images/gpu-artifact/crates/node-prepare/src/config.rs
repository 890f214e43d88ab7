//! Where the pipeline keeps its state on the host, and which pool is this node's.
//!
//! Every host path lives under one root (`/` in production, a fixture tree in
//! tests), so nothing here may hard-code an absolute path without it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::driver_files::DriverFiles;

/// The CDI vendor and class of our per-claim specs (`<vendor>/<class>`).
pub const CDI_KIND: &str = "gpu.deckhouse.io/claim";

/// How the pipeline finds the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePrepareConfig {
    /// The Kubernetes node this handler serves; its pool is `gpus/<node>`.
    pub node_name: String,
    /// The host's `/`.
    pub host_root: PathBuf,
    /// The plugin data directory: node lock and checkpoint.
    pub plugin_dir: PathBuf,
    /// Where per-claim CDI specs are written (a dynamic CDI directory).
    pub cdi_dir: PathBuf,
    /// How long a prepare or unprepare waits for the node lock. NVIDIA's
    /// driver uses 10 s; a GPU instance destroy alone takes about 1 s.
    pub lock_timeout: Duration,
    /// The `nvidia-smi` that sets a card's time slice. A bare name is looked
    /// up in `PATH` of the handler's process.
    pub nvidia_smi: PathBuf,
    /// The `nvidia-cuda-mps-control` that starts and stops a card's MPS
    /// control daemon. A bare name is looked up in `PATH`.
    pub mps_control: PathBuf,
    /// How long one run of `nvidia-smi` or `nvidia-cuda-mps-control` may take.
    pub tool_timeout: Duration,
    /// How long one sysfs driver write may block and the kernel may take to show a PCI function's
    /// new driver after an unbind or bind (VFIO).
    pub vfio_bind_timeout: Duration,
    /// The driver's libraries and tools every GPU container gets (mounts and the ld cache hook);
    /// `None`: device nodes and environment only.
    pub driver: Option<DriverFiles>,
    /// Runs a card's MPS control daemon with the card's shared-memory directory
    /// as its `/dev/shm`: `<launcher> mps-namespace <shm dir> -- <mps_control> ...`. `None`: the
    /// daemon runs as it is, and the directory is a plain one (simulated nodes).
    pub mps_launcher: Option<PathBuf>,
    /// The size in bytes of the tmpfs mounted at each card's MPS shared-memory directory while its
    /// daemon runs (`mps_shm`); `None`: a plain directory (simulated nodes, which may not mount).
    pub mps_shm_bytes: Option<u64>,
    /// Runs each card's MPS control daemon as a static Pod of the node's kubelet
    /// (`mps_static_pods`), apart from the handler's container; `None`: as the handler's child.
    pub mps_static_pods: Option<MpsStaticPods>,
    /// How long one vendor library call (NVML: MIG mode, instance create and destroy) may take.
    pub vendor_call_timeout: Duration,
}

impl NodePrepareConfig {
    /// The production layout below `host_root`: plugin dir
    /// `var/lib/kubelet/plugins/gpu.deckhouse.io`, CDI dir `var/run/cdi`,
    /// a 10 s lock timeout, `nvidia-smi` and `nvidia-cuda-mps-control` from
    /// `PATH` with 5 s each, 5 s for a driver write and (un)bind, 8 s for a
    /// vendor call: every call that can block ends inside the lock's wait,
    /// so a hung kernel or tool never keeps the node lock ([`Self::check_bounds`]).
    pub fn new(node_name: impl Into<String>, host_root: impl Into<PathBuf>) -> Self {
        let host_root = host_root.into();
        NodePrepareConfig {
            node_name: node_name.into(),
            plugin_dir: host_root.join("var/lib/kubelet/plugins/gpu.deckhouse.io"),
            cdi_dir: host_root.join("var/run/cdi"),
            host_root,
            lock_timeout: Duration::from_secs(10),
            nvidia_smi: PathBuf::from("nvidia-smi"),
            mps_control: PathBuf::from("nvidia-cuda-mps-control"),
            tool_timeout: Duration::from_secs(5),
            vfio_bind_timeout: Duration::from_secs(5),
            vendor_call_timeout: Duration::from_secs(8),
            driver: None,
            mps_launcher: None,
            mps_shm_bytes: None,
            mps_static_pods: None,
        }
    }

    /// Every bound on a call that can block is shorter than the node lock's wait, so a caller
    /// waiting for the lock outlives a holder stuck in one call; an error names the bound.
    pub fn check_bounds(&self) -> Result<(), String> {
        let bounds = [
            ("tool_timeout", self.tool_timeout),
            ("vfio_bind_timeout", self.vfio_bind_timeout),
            ("vendor_call_timeout", self.vendor_call_timeout),
            (
                "mps_static_pods.start_timeout",
                self.mps_static_pods
                    .as_ref()
                    .map_or(Duration::from_secs(1), |pods| pods.start_timeout),
            ),
        ];
        for (name, bound) in bounds {
            if bound.is_zero() || bound >= self.lock_timeout {
                return Err(format!(
                    "{name} is {bound:?}; it must be above zero and below the node lock's wait ({:?})",
                    self.lock_timeout
                ));
            }
        }
        Ok(())
    }

    /// The node's ResourceSlice pool (architecture section 4).
    pub fn pool_name(&self) -> String {
        dra_offers::pool_name(&self.node_name)
    }

    /// An absolute host path (such as `/proc/driver/...`) below the root.
    pub fn host_path(&self, absolute: impl AsRef<Path>) -> PathBuf {
        let path = absolute.as_ref();
        self.host_root.join(path.strip_prefix("/").unwrap_or(path))
    }

    pub fn lock_path(&self) -> PathBuf {
        self.plugin_dir.join("prepare.lock")
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.plugin_dir.join("checkpoint.json")
    }

    /// The per-claim CDI spec file, named as NVIDIA's transient specs are
    /// (`<vendor>-<class>_<claimUID>`).
    pub fn cdi_spec_path(&self, claim_uid: &str) -> PathBuf {
        self.cdi_dir.join(format!("gpu.deckhouse.io-claim_{claim_uid}.json"))
    }

    /// The directory of a card's MPS control daemon (`<plugin_dir>/mps/<pci address>`), holding
    /// `pipe/` and `log/`. It exists exactly while the node may run a daemon for the card.
    pub fn mps_dir(&self, card: &str) -> PathBuf {
        self.plugin_dir.join("mps").join(card)
    }

    /// `CUDA_MPS_PIPE_DIRECTORY` of a card's daemon.
    pub fn mps_pipe_dir(&self, card: &str) -> PathBuf {
        self.mps_dir(card).join("pipe")
    }

    /// `CUDA_MPS_LOG_DIRECTORY` of a card's daemon.
    pub fn mps_log_dir(&self, card: &str) -> PathBuf {
        self.mps_dir(card).join("log")
    }

    /// The card's MPS shared memory: the daemon's and every client's `/dev/shm`.
    pub fn mps_shm_dir(&self, card: &str) -> PathBuf {
        self.mps_dir(card).join("shm")
    }

    /// The QEMU hook payload of a VFIO claim: `<plugin_dir>/vfio/<claimUID>.json` (see the crate docs).
    pub fn vfio_payload_path(&self, claim_uid: &str) -> PathBuf {
        self.plugin_dir.join("vfio").join(format!("{claim_uid}.json"))
    }

    pub fn boot_id_path(&self) -> PathBuf {
        self.host_path("/proc/sys/kernel/random/boot_id")
    }
}

/// Where and how the daemons' static Pods are written (see `mps_static_pod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpsStaticPods {
    /// The kubelet's `staticPodPath`, as the handler sees it.
    pub dir: PathBuf,
    /// The handler's own image, by digest.
    pub image: String,
    /// The namespace of their mirror Pods (the module's).
    pub namespace: String,
    /// The driver root on the host.
    pub driver_root: PathBuf,
    /// How long a start waits for the kubelet to run the daemon's Pod and the daemon to answer:
    /// below the node lock's wait, as every bound ([`NodePrepareConfig::check_bounds`]).
    pub start_timeout: Duration,
}

impl MpsStaticPods {
    /// The kubelet notices a new manifest at once (inotify) and starts a container of an image it
    /// has (the handler's own) in a second or two; 8 s leaves room on a loaded node.
    pub const DEFAULT_START_TIMEOUT: Duration = Duration::from_secs(8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_blocking_call_ends_inside_the_lock_wait() {
        let config = NodePrepareConfig::new("w1", "/");
        config.check_bounds().unwrap();
        let slow = NodePrepareConfig {
            tool_timeout: Duration::from_secs(30),
            ..config
        };
        let error = slow.check_bounds().unwrap_err();
        assert!(error.starts_with("tool_timeout is 30s"), "{error}");
    }

    #[test]
    fn every_path_lives_under_the_host_root() {
        let config = NodePrepareConfig::new("w1", "/fixture");
        assert_eq!(config.pool_name(), "gpus/w1");
        assert_eq!(
            config.checkpoint_path(),
            Path::new("/fixture/var/lib/kubelet/plugins/gpu.deckhouse.io/checkpoint.json")
        );
        assert_eq!(
            config.cdi_spec_path("0a1b"),
            Path::new("/fixture/var/run/cdi/gpu.deckhouse.io-claim_0a1b.json")
        );
        assert_eq!(
            config.mps_pipe_dir("0000:01:00.0"),
            Path::new("/fixture/var/lib/kubelet/plugins/gpu.deckhouse.io/mps/0000:01:00.0/pipe")
        );
        assert_eq!(
            config.vfio_payload_path("0a1b"),
            Path::new("/fixture/var/lib/kubelet/plugins/gpu.deckhouse.io/vfio/0a1b.json")
        );
        assert_eq!(
            config.boot_id_path(),
            Path::new("/fixture/proc/sys/kernel/random/boot_id")
        );
    }
}
