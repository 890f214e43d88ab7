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

/// A DRA health service (KEP-4680) the simulated kubelet can stream from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthVersion {
    V1,
    V1beta1,
    V1alpha1,
}

impl HealthVersion {
    /// What a plugin lists in `supported_versions` for this service.
    pub fn registration_name(self) -> &'static str {
        match self {
            HealthVersion::V1 => "v1.DRAResourceHealth",
            HealthVersion::V1beta1 => "v1beta1.DRAResourceHealth",
            HealthVersion::V1alpha1 => "v1alpha1.DRAResourceHealth",
        }
    }
}

/// Whether and how the kubelet watches a plugin's health, by release (`pkg/kubelet/cm/dra/plugin`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HealthWatch {
    /// The `ResourceHealthStatus` gate is off: no stream, no `allocatedResourcesStatus`.
    Off,
    /// 1.34-1.36 with the gate on: always this version, whatever the plugin advertises.
    Always(HealthVersion),
    /// 1.37 and later: the first of the kubelet's list (newest first) that the plugin advertises;
    /// none when it advertises none.
    Negotiated(Vec<HealthVersion>),
}

impl HealthWatch {
    /// The 1.37 kubelet: v1, else v1alpha1 (v1beta1 is not among what it knows).
    pub fn kubelet_1_37() -> Self {
        HealthWatch::Negotiated(vec![HealthVersion::V1, HealthVersion::V1alpha1])
    }

    /// The service this kubelet streams from for a plugin advertising `plugin_versions`.
    pub(crate) fn choose(&self, plugin_versions: &[String]) -> Option<HealthVersion> {
        match self {
            HealthWatch::Off => None,
            HealthWatch::Always(version) => Some(*version),
            HealthWatch::Negotiated(kubelet) => kubelet
                .iter()
                .copied()
                .find(|version| plugin_versions.iter().any(|v| v == version.registration_name())),
        }
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
    fn health_follows_the_release() {
        let advertised = list(&["v1.DRAPlugin", "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]);
        assert_eq!(HealthWatch::kubelet_1_37().choose(&advertised), Some(HealthVersion::V1));
        let only_beta = list(&["v1.DRAPlugin", "v1beta1.DRAResourceHealth"]);
        assert_eq!(
            HealthWatch::kubelet_1_37().choose(&only_beta),
            None,
            "1.37 does not speak v1beta1"
        );
        let old = HealthWatch::Always(HealthVersion::V1alpha1);
        assert_eq!(old.choose(&list(&["v1.DRAPlugin"])), Some(HealthVersion::V1alpha1));
        assert_eq!(HealthWatch::Off.choose(&advertised), None);
    }

    #[test]
    fn no_common_version_is_no_choice() {
        assert_eq!(choose_version(&list(&["v1.DRAPlugin"]), &[DraVersion::V1beta1]), None);
        assert_eq!(choose_version(&[], &DraVersion::all()), None);
    }
}
