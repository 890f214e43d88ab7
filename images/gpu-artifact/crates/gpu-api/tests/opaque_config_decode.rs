//! Strict decoding of our opaque configs: what is accepted, and for each refusal the exact message
//! a user sees on the claim (the field's path and what would be accepted).

use gpu_api::opaque_config::{
    ConfigError, GpuConfig, GpuSharing, MigDeviceConfig, MigSharing, MpsConfig, OpaqueConfig, SharingStrategy,
    TimeSliceInterval, TimeSlicingConfig, VfioDeviceConfig,
};
use serde_json::{Value, json};

const API_VERSION: &str = "resource.gpu.deckhouse.io/v1alpha1";

fn gpu(sharing: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "GpuConfig", "sharing": sharing})
}

fn refused(parameters: Value) -> String {
    OpaqueConfig::decode(&parameters)
        .expect_err("the config is refused")
        .to_string()
}

#[test]
fn the_virtualization_modules_vfio_config_is_accepted() {
    let parameters = json!({"apiVersion": API_VERSION, "kind": "VfioDeviceConfig"});
    assert_eq!(
        OpaqueConfig::decode(&parameters),
        Ok(OpaqueConfig::VfioDeviceConfig(VfioDeviceConfig {}))
    );
}

#[test]
fn a_full_gpu_config_is_decoded() {
    let time_slicing = gpu(json!({"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}}));
    assert_eq!(
        OpaqueConfig::decode(&time_slicing).unwrap(),
        OpaqueConfig::GpuConfig(GpuConfig {
            sharing: Some(GpuSharing {
                strategy: SharingStrategy::TimeSlicing,
                time_slicing: Some(TimeSlicingConfig {
                    interval: TimeSliceInterval::Long
                }),
                mps: None,
            })
        })
    );
    let mps = gpu(json!({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": 100}}));
    let OpaqueConfig::GpuConfig(GpuConfig { sharing: Some(sharing) }) = OpaqueConfig::decode(&mps).unwrap() else {
        panic!("a GpuConfig with sharing");
    };
    assert_eq!(sharing.strategy, SharingStrategy::Mps);
    assert_eq!(
        sharing.mps,
        Some(MpsConfig {
            default_active_thread_percentage: Some(100)
        })
    );
}

#[test]
fn absent_and_null_fields_take_their_defaults() {
    let bare = json!({"apiVersion": API_VERSION, "kind": "GpuConfig", "sharing": null});
    assert_eq!(
        OpaqueConfig::decode(&bare),
        Ok(OpaqueConfig::GpuConfig(GpuConfig { sharing: None }))
    );
    let interval_default = gpu(json!({"strategy": "TimeSlicing", "timeSlicing": {}}));
    let OpaqueConfig::GpuConfig(config) = OpaqueConfig::decode(&interval_default).unwrap() else {
        panic!("a GpuConfig");
    };
    let time_slicing = config.sharing.unwrap().time_slicing.unwrap();
    assert_eq!(time_slicing.interval, TimeSliceInterval::Default);
    let exclusive = gpu(json!({}));
    let OpaqueConfig::GpuConfig(config) = OpaqueConfig::decode(&exclusive).unwrap() else {
        panic!("a GpuConfig");
    };
    assert_eq!(config.sharing.unwrap().strategy, SharingStrategy::Exclusive);
}

#[test]
fn a_mig_config_allows_mps_but_not_time_slicing() {
    let mps = json!({"apiVersion": API_VERSION, "kind": "MigDeviceConfig", "sharing": {"strategy": "MPS", "mps": {}}});
    assert_eq!(
        OpaqueConfig::decode(&mps),
        Ok(OpaqueConfig::MigDeviceConfig(MigDeviceConfig {
            sharing: Some(MigSharing {
                strategy: SharingStrategy::Mps,
                mps: Some(MpsConfig::default()),
            })
        }))
    );
    let time_slicing =
        json!({"apiVersion": API_VERSION, "kind": "MigDeviceConfig", "sharing": {"strategy": "TimeSlicing"}});
    assert_eq!(
        refused(time_slicing),
        "sharing.strategy: \"TimeSlicing\" is not allowed; allowed: Exclusive, MPS"
    );
    let field = json!({"apiVersion": API_VERSION, "kind": "MigDeviceConfig", "sharing": {"timeSlicing": {}}});
    assert_eq!(
        refused(field),
        "sharing.timeSlicing: unknown field; allowed fields: strategy, mps"
    );
}

#[test]
fn api_version_and_kind_are_checked() {
    assert_eq!(
        refused(json!({"kind": "GpuConfig"})),
        "apiVersion is required; allowed: resource.gpu.deckhouse.io/v1alpha1"
    );
    assert_eq!(
        refused(json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"})),
        "apiVersion: \"resource.nvidia.com/v1beta1\" is not allowed; allowed: resource.gpu.deckhouse.io/v1alpha1"
    );
    assert_eq!(
        refused(json!({"apiVersion": API_VERSION})),
        "kind is required; allowed: GpuConfig, MigDeviceConfig, VfioDeviceConfig"
    );
    assert_eq!(
        refused(json!({"apiVersion": API_VERSION, "kind": "ComputeDomainChannelConfig"})),
        "kind: \"ComputeDomainChannelConfig\" is not allowed; allowed: GpuConfig, MigDeviceConfig, VfioDeviceConfig"
    );
    assert_eq!(
        refused(json!("GpuConfig")),
        "parameters: must be an object, got \"GpuConfig\""
    );
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    let vfio = json!({"apiVersion": API_VERSION, "kind": "VfioDeviceConfig", "iommu": {}});
    assert_eq!(refused(vfio), "iommu: unknown field; allowed fields: apiVersion, kind");
    let top = json!({"apiVersion": API_VERSION, "kind": "GpuConfig", "shareing": {}});
    assert_eq!(
        refused(top),
        "shareing: unknown field; allowed fields: apiVersion, kind, sharing"
    );
    assert_eq!(
        refused(gpu(json!({"strategy": "TimeSlicing", "timeSlicingConfig": {}}))),
        "sharing.timeSlicingConfig: unknown field; allowed fields: strategy, timeSlicing, mps"
    );
    assert_eq!(
        refused(gpu(
            json!({"strategy": "TimeSlicing", "timeSlicing": {"length": "Long"}})
        )),
        "sharing.timeSlicing.length: unknown field; allowed fields: interval"
    );
    assert_eq!(
        refused(gpu(json!({"strategy": "MPS", "mps": {"multiUser": true}}))),
        "sharing.mps.multiUser: unknown field; allowed fields: defaultActiveThreadPercentage"
    );
}

#[test]
fn values_are_checked_against_the_allowed_ones() {
    assert_eq!(
        refused(gpu(json!({"strategy": "mps"}))),
        "sharing.strategy: \"mps\" is not allowed; allowed: Exclusive, TimeSlicing, MPS"
    );
    assert_eq!(
        refused(gpu(json!({"strategy": 1}))),
        "sharing.strategy: must be a string, got 1"
    );
    assert_eq!(
        refused(gpu(
            json!({"strategy": "TimeSlicing", "timeSlicing": {"interval": "VeryLong"}})
        )),
        "sharing.timeSlicing.interval: \"VeryLong\" is not allowed; allowed: Default, Short, Medium, Long"
    );
    assert_eq!(refused(gpu(json!("MPS"))), "sharing: must be an object, got \"MPS\"");
}

#[test]
fn the_thread_percentage_is_an_integer_from_1_to_100() {
    let with = |value: Value| gpu(json!({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": value}}));
    for bad in [json!(0), json!(101), json!(-5), json!(50.5)] {
        assert_eq!(
            refused(with(bad.clone())),
            format!(
                "sharing.mps.defaultActiveThreadPercentage: {bad} is not allowed; allowed: an integer from 1 to 100"
            )
        );
    }
    assert_eq!(
        refused(with(json!("50"))),
        "sharing.mps.defaultActiveThreadPercentage: must be an integer from 1 to 100, got \"50\""
    );
    assert!(OpaqueConfig::decode(&with(json!(1))).is_ok());
}

#[test]
fn strategy_settings_need_their_strategy() {
    assert_eq!(
        refused(gpu(json!({"strategy": "MPS", "timeSlicing": {"interval": "Short"}}))),
        "sharing.timeSlicing is allowed only with sharing.strategy TimeSlicing, but the strategy is MPS"
    );
    assert_eq!(
        refused(gpu(json!({"mps": {}}))),
        "sharing.mps is allowed only with sharing.strategy MPS, but the strategy is Exclusive"
    );
    let error = OpaqueConfig::decode(&gpu(json!({"strategy": "TimeSlicing", "mps": {}}))).unwrap_err();
    assert_eq!(
        error,
        ConfigError::NotWithStrategy {
            field: "sharing.mps".into(),
            needs: "MPS",
            strategy: "TimeSlicing",
        }
    );
}
