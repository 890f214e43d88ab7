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
//! - `MPS_SUPERVISE_INTERVAL` (default `5s`): how often the MPS daemons of cards with prepared MPS
//!   shares are checked and started again if they died.
//!
//! The pipeline's time limits (tool runs, sysfs writes, vendor calls) are checked at start to end
//! inside the node lock's wait.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use kubelet_plugin::{DEFAULT_KUBELET_ROOT, DRIVER_NAME, PluginConfig};
use node_prepare::NodePrepareConfig;

#[derive(Debug, Clone, PartialEq)]
pub struct NodePluginConfig {
    pub host_root: PathBuf,
    pub kubelet_root: PathBuf,
    pub cdi_dir: PathBuf,
    pub mig_offers: bool,
    pub nvidia_smi: PathBuf,
    pub mps_control: PathBuf,
    pub mps_supervise_interval: Duration,
}

impl NodePluginConfig {
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let path =
            |key: &str, default: &str| PathBuf::from(get(key).filter(|v| !v.is_empty()).unwrap_or(default.into()));
        let mig_offers = match get("MIG_OFFERS").as_deref().map(str::trim) {
            None | Some("") | Some("true") => true,
            Some("false") => false,
            Some(other) => bail!("MIG_OFFERS must be true or false, not {other:?}"),
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
        let config = Self {
            host_root: path("HOST_ROOT", "/"),
            kubelet_root: path("KUBELET_ROOT", DEFAULT_KUBELET_ROOT),
            cdi_dir: path("CDI_DIR", "/var/run/cdi"),
            mig_offers,
            nvidia_smi: path("NVIDIA_SMI", "nvidia-smi"),
            mps_control: path("NVIDIA_MPS_CONTROL", "nvidia-cuda-mps-control"),
            mps_supervise_interval,
        };
        if let Err(reason) = config.prepare("-").check_bounds() {
            bail!("the node pipeline's time limits: {reason}");
        }
        Ok(config)
    }

    pub fn plugin(&self) -> PluginConfig {
        PluginConfig {
            driver_name: DRIVER_NAME.to_owned(),
            kubelet_root: self.kubelet_root.clone(),
        }
    }

    /// The prepare pipeline keeps its lock and checkpoint beside the DRA socket.
    pub fn prepare(&self, node_name: &str) -> NodePrepareConfig {
        let plugin_dir = self
            .plugin()
            .dra_socket()
            .parent()
            .map(PathBuf::from)
            .unwrap_or_default();
        NodePrepareConfig {
            plugin_dir,
            cdi_dir: self.cdi_dir.clone(),
            lock_timeout: Duration::from_secs(10),
            nvidia_smi: self.nvidia_smi.clone(),
            mps_control: self.mps_control.clone(),
            ..NodePrepareConfig::new(node_name, &self.host_root)
        }
    }
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
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> anyhow::Result<NodePluginConfig> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        NodePluginConfig::from_lookup(|key| env.get(key).cloned())
    }

    #[test]
    fn production_defaults_and_paths_follow_the_kubelet_root() {
        let c = config(&[]).unwrap();
        assert!(c.mig_offers);
        let prepare = c.prepare("w1");
        assert_eq!(
            prepare.plugin_dir,
            PathBuf::from("/var/lib/kubelet/plugins/gpu.deckhouse.io")
        );
        assert_eq!(prepare.cdi_dir, PathBuf::from("/var/run/cdi"));
        assert_eq!(prepare.nvidia_smi, PathBuf::from("nvidia-smi"));
        assert_eq!(prepare.mps_control, PathBuf::from("nvidia-cuda-mps-control"));
        let moved = config(&[
            ("KUBELET_ROOT", "/t/kubelet"),
            ("HOST_ROOT", "/t"),
            ("MIG_OFFERS", "false"),
            ("NVIDIA_SMI", "/driver/usr/bin/nvidia-smi"),
            ("NVIDIA_MPS_CONTROL", "/driver/usr/bin/nvidia-cuda-mps-control"),
        ])
        .unwrap();
        assert_eq!(
            moved.prepare("w1").nvidia_smi,
            PathBuf::from("/driver/usr/bin/nvidia-smi")
        );
        assert_eq!(
            moved.prepare("w1").mps_control,
            PathBuf::from("/driver/usr/bin/nvidia-cuda-mps-control")
        );
        assert_eq!(
            moved.prepare("w1").plugin_dir,
            PathBuf::from("/t/kubelet/plugins/gpu.deckhouse.io")
        );
        assert_eq!(moved.prepare("w1").host_root, PathBuf::from("/t"));
        assert!(!moved.mig_offers);
    }

    #[test]
    fn a_bad_switch_names_the_variable() {
        let error = config(&[("MIG_OFFERS", "yes")]).unwrap_err().to_string();
        assert!(error.contains("MIG_OFFERS") && error.contains("\"yes\""), "{error}");
    }
}
