//! Which opaque config applies to one request of an allocated claim. The scheduler copies the
//! DeviceClass's configs (`source: FromClass`, naming the request) and the claim's own configs
//! (`source: FromClaim`) into `status.allocation.devices.config`; class configs come first, claim
//! configs after them, and the later one wins, so a claim overrides its class per request.

use k8s_openapi::api::resource::v1::DeviceAllocationConfiguration;

use super::error::ConfigError;
use super::types::OpaqueConfig;

/// The `source` of a config the scheduler took from the DeviceClass.
pub const SOURCE_CLASS: &str = "FromClass";
/// The `source` of a config the claim itself carries.
pub const SOURCE_CLAIM: &str = "FromClaim";

/// A config of our driver that applies to the request but cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config {position} of status.allocation.devices.config ({origin}): {error}")]
pub struct InvalidConfig {
    /// The config's index in `status.allocation.devices.config`.
    pub position: usize,
    /// `FromClass` or `FromClaim`.
    pub origin: String,
    pub error: ConfigError,
}

/// The config of `driver` that applies to `request` (`<req>` or `<req>/<sub>`), or `None` when no
/// config names it. Every applying config is decoded strictly, also one that a later config
/// overrides: a broken config is a mistake the user must hear about.
pub fn config_for_request(
    configs: &[DeviceAllocationConfiguration],
    driver: &str,
    request: &str,
) -> Result<Option<OpaqueConfig>, InvalidConfig> {
    let mut ordered = applying(configs, driver, request);
    // Stable: configs of one source keep their order.
    ordered.sort_by_key(|(_, config, _)| config.source != SOURCE_CLASS);
    let mut winner = None;
    for (position, config, parameters) in ordered {
        let decoded = OpaqueConfig::decode(parameters).map_err(|error| InvalidConfig {
            position,
            origin: config.source.clone(),
            error,
        })?;
        winner = Some(decoded);
    }
    Ok(winner)
}

/// Whether the DeviceClass lets `request` have its cards passed through: one of the class's
/// configs of `driver` that applies to the request is a `VfioDeviceConfig`. VFIO is an admin's
/// decision; a claim's own config or a Pod annotation selects it only within such a class.
pub fn class_allows_vfio(configs: &[DeviceAllocationConfiguration], driver: &str, request: &str) -> bool {
    applying(configs, driver, request)
        .into_iter()
        .filter(|(_, config, _)| config.source == SOURCE_CLASS)
        .any(|(_, _, parameters)| matches!(OpaqueConfig::decode(parameters), Ok(OpaqueConfig::VfioDeviceConfig(_))))
}

/// The configs of `driver` that apply to `request` (`<req>` or `<req>/<sub>`), with their index
/// and parameters, in status order.
fn applying<'a>(
    configs: &'a [DeviceAllocationConfiguration],
    driver: &str,
    request: &str,
) -> Vec<(usize, &'a DeviceAllocationConfiguration, &'a serde_json::Value)> {
    let main_request = request.split('/').next().unwrap_or(request);
    configs
        .iter()
        .enumerate()
        .filter_map(|(position, config)| {
            let opaque = config.opaque.as_ref().filter(|opaque| opaque.driver == driver)?;
            let names = config.requests.as_deref().unwrap_or_default();
            // A config naming the main request applies to each of its subrequests; one naming
            // `<main>/<sub>` only to that subrequest (k8s.io/api resource/v1 types.go,
            // DeviceClaimConfiguration.Requests: "References to subrequests must include the name
            // of the main request and may include the subrequest using the format
            // <main request>[/<subrequest>]"; a result names its subrequest as `<main>/<sub>`).
            let applies = names.is_empty() || names.iter().any(|name| name == request || name == main_request);
            applies.then_some((position, config, &opaque.parameters.0))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::OpaqueDeviceConfiguration;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use serde_json::json;

    use crate::opaque_config::{GpuConfig, GpuSharing, SharingStrategy, VfioDeviceConfig};

    fn config(
        source: &str,
        driver: &str,
        requests: &[&str],
        parameters: serde_json::Value,
    ) -> DeviceAllocationConfiguration {
        DeviceAllocationConfiguration {
            source: source.into(),
            requests: (!requests.is_empty()).then(|| requests.iter().map(|r| (*r).to_owned()).collect()),
            opaque: Some(OpaqueDeviceConfiguration {
                driver: driver.into(),
                parameters: RawExtension(parameters),
            }),
        }
    }

    fn gpu(strategy: &str) -> serde_json::Value {
        json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig", "sharing": {"strategy": strategy}})
    }

    fn sharing(strategy: SharingStrategy) -> OpaqueConfig {
        OpaqueConfig::GpuConfig(GpuConfig {
            sharing: Some(GpuSharing {
                strategy,
                ..GpuSharing::default()
            }),
        })
    }

    #[test]
    fn the_claim_overrides_the_class_whatever_the_order_written() {
        let configs = [
            config(SOURCE_CLAIM, "gpu.deckhouse.io", &[], gpu("MPS")),
            config(SOURCE_CLASS, "gpu.deckhouse.io", &["gpu"], gpu("TimeSlicing")),
        ];
        let chosen = config_for_request(&configs, "gpu.deckhouse.io", "gpu").unwrap();
        assert_eq!(chosen, Some(sharing(SharingStrategy::Mps)));
    }

    #[test]
    fn later_claim_configs_win_and_other_requests_and_drivers_are_ignored() {
        let vfio = json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "VfioDeviceConfig"});
        let configs = [
            config(SOURCE_CLAIM, "gpu.deckhouse.io", &["gpu"], gpu("MPS")),
            config(SOURCE_CLAIM, "gpu.deckhouse.io", &["gpu"], vfio),
            config(SOURCE_CLAIM, "gpu.deckhouse.io", &["other"], gpu("TimeSlicing")),
            config(SOURCE_CLAIM, "other.example.com", &[], json!({"anything": true})),
        ];
        let chosen = config_for_request(&configs, "gpu.deckhouse.io", "gpu").unwrap();
        assert_eq!(chosen, Some(OpaqueConfig::VfioDeviceConfig(VfioDeviceConfig {})));
        assert_eq!(
            config_for_request(&configs[2..], "gpu.deckhouse.io", "gpu").unwrap(),
            None
        );
    }

    #[test]
    fn a_config_of_the_main_request_applies_to_its_subrequests() {
        let configs = [config(SOURCE_CLAIM, "gpu.deckhouse.io", &["gpu"], gpu("MPS"))];
        let chosen = config_for_request(&configs, "gpu.deckhouse.io", "gpu/shared").unwrap();
        assert_eq!(chosen, Some(sharing(SharingStrategy::Mps)));
        let only_other_sub = [config(SOURCE_CLAIM, "gpu.deckhouse.io", &["gpu/mig"], gpu("MPS"))];
        assert_eq!(
            config_for_request(&only_other_sub, "gpu.deckhouse.io", "gpu/shared").unwrap(),
            None
        );
    }

    #[test]
    fn an_overridden_but_broken_config_is_still_an_error() {
        let configs = [
            config(SOURCE_CLASS, "gpu.deckhouse.io", &["gpu"], gpu("Sliced")),
            config(SOURCE_CLAIM, "gpu.deckhouse.io", &[], gpu("MPS")),
        ];
        let error = config_for_request(&configs, "gpu.deckhouse.io", "gpu").unwrap_err();
        assert_eq!(error.position, 0);
        assert_eq!(
            error.to_string(),
            "config 0 of status.allocation.devices.config (FromClass): sharing.strategy: \"Sliced\" is not \
             allowed; allowed: Exclusive, TimeSlicing, MPS"
        );
    }
}
