//! Which DRA service the kubelet talks to a plugin through: the first entry of the plugin's
//! `supported_versions` that the kubelet also supports, in the plugin's order.

/// A DRA gRPC service the simulated kubelet can call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DraVersion {
    V1,
    V1beta1,
}

impl DraVersion {
    /// What a plugin lists in `supported_versions` for this service.
    pub fn registration_name(self) -> &'static str {
        match self {
            DraVersion::V1 => "v1.DRAPlugin",
            DraVersion::V1beta1 => "v1beta1.DRAPlugin",
        }
    }

    /// The kubelet's own list (1.34 and later).
    pub fn all() -> Vec<DraVersion> {
        vec![DraVersion::V1, DraVersion::V1beta1]
    }
}

impl std::fmt::Display for DraVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.registration_name())
    }
}

/// The kubelet's choice (`validateSupportedServices`): walk the plugin's list in its order.
pub(crate) fn choose_version(plugin_versions: &[String], kubelet_versions: &[DraVersion]) -> Option<DraVersion> {
    plugin_versions.iter().find_map(|offered| {
        kubelet_versions
            .iter()
            .copied()
            .find(|version| version.registration_name() == offered)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    #[test]
    fn the_plugins_order_wins() {
        let kubelet = DraVersion::all();
        assert_eq!(
            choose_version(&list(&["v1beta1.DRAPlugin", "v1.DRAPlugin"]), &kubelet),
            Some(DraVersion::V1beta1)
        );
        assert_eq!(
            choose_version(&list(&["v1alpha1.DRAResourceHealth", "v1.DRAPlugin"]), &kubelet),
            Some(DraVersion::V1)
        );
    }

    #[test]
    fn no_common_version_is_no_choice() {
        assert_eq!(choose_version(&list(&["v1.DRAPlugin"]), &[DraVersion::V1beta1]), None);
        assert_eq!(choose_version(&[], &DraVersion::all()), None);
    }
}
