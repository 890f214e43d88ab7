//! Where the plugin's sockets live: every path under the kubelet's root directory, the way the
//! kubelet's own plugin helper lays them out.

use std::path::PathBuf;

/// The driver name this module registers with the kubelet.
pub const DRIVER_NAME: &str = "gpu.deckhouse.io";

/// The kubelet's default root directory.
pub const DEFAULT_KUBELET_ROOT: &str = "/var/lib/kubelet";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    pub driver_name: String,
    /// The kubelet's root directory (`--root-dir`); tests point it at a temporary directory.
    pub kubelet_root: PathBuf,
}

impl Default for PluginConfig {
    fn default() -> Self {
        Self {
            driver_name: DRIVER_NAME.to_owned(),
            kubelet_root: PathBuf::from(DEFAULT_KUBELET_ROOT),
        }
    }
}

impl PluginConfig {
    /// `<root>/plugins/<driver>/dra.sock`: the DRA services; the kubelet dials it after registration.
    pub fn dra_socket(&self) -> PathBuf {
        self.kubelet_root
            .join("plugins")
            .join(&self.driver_name)
            .join("dra.sock")
    }

    /// `<root>/plugins_registry/<driver>-reg.sock`: where the kubelet's plugin watcher finds us.
    pub fn registration_socket(&self) -> PathBuf {
        self.kubelet_root
            .join("plugins_registry")
            .join(format!("{}-reg.sock", self.driver_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_paths_are_the_kubelet_helpers() {
        let config = PluginConfig::default();
        assert_eq!(
            config.dra_socket(),
            PathBuf::from("/var/lib/kubelet/plugins/gpu.deckhouse.io/dra.sock")
        );
        assert_eq!(
            config.registration_socket(),
            PathBuf::from("/var/lib/kubelet/plugins_registry/gpu.deckhouse.io-reg.sock")
        );
    }
}
