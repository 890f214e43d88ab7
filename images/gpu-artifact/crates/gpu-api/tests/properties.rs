//! Bad input by the thousand for the opaque configs a DeviceClass or a claim hands the node: any
//! JSON value, shaped like a config or not, decodes or is refused with the field at fault named;
//! nothing panics, and which config applies to a request is decided the same way for any list.

use gpu_api::opaque_config::{ConfigError, OpaqueConfig, class_allows_vfio, config_for_request};
use k8s_openapi::api::resource::v1::{DeviceAllocationConfiguration, OpaqueDeviceConfiguration};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};
use serde_json::{Map, Value, json};

/// Keys and strings a config uses, so generated values often get deep before they go wrong.
const WORDS: &[&str] = &[
    "apiVersion",
    "kind",
    "sharing",
    "strategy",
    "timeSlicing",
    "interval",
    "mps",
    "defaultActiveThreadPercentage",
    "resource.gpu.deckhouse.io/v1alpha1",
    "GpuConfig",
    "MigDeviceConfig",
    "VfioDeviceConfig",
    "TimeSlicing",
    "MPS",
    "Exclusive",
    "Default",
    "Long",
    "Short",
    "Medium",
    "iommu",
    "",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(WORDS).prop_map(str::to_owned),
        1 => any::<String>(),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        (0u8..=120).prop_map(Value::from),
        word().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((word(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A config close to a valid one: a real kind and apiVersion around generated fields.
fn config_like() -> impl Strategy<Value = Value> {
    (proptest::sample::select(&WORDS[6..10]), json()).prop_map(|(kind, body)| {
        let mut config = match body {
            Value::Object(fields) => fields,
            other => Map::from_iter([("sharing".to_owned(), other)]),
        };
        config.insert("apiVersion".into(), json!("resource.gpu.deckhouse.io/v1alpha1"));
        config.insert("kind".into(), json!(kind));
        Value::Object(config)
    })
}

fn field_of(error: &ConfigError) -> &str {
    match error {
        ConfigError::UnknownField { field, .. }
        | ConfigError::Missing { field, .. }
        | ConfigError::WrongType { field, .. }
        | ConfigError::InvalidValue { field, .. }
        | ConfigError::NotWithStrategy { field, .. } => field,
    }
}

#[test]
fn property_any_json_decodes_or_is_refused_naming_the_field() {
    let inputs = prop_oneof![json(), config_like()];
    check("opaque configs", file!(), inputs, |value| {
        match OpaqueConfig::decode(&value) {
            Ok(config) => ensure(value.get("kind").and_then(Value::as_str) == Some(config.kind()), || {
                format!("{value} decoded as {}", config.kind())
            }),
            Err(error) => {
                let message = error.to_string();
                ensure(
                    !field_of(&error).is_empty() && message.starts_with(field_of(&error)),
                    || format!("{value}: the error names no field: {message}"),
                )
            }
        }
    });
}

fn allocation_config(
    source: bool,
    driver: bool,
    requests: Option<Vec<String>>,
    parameters: Value,
) -> DeviceAllocationConfiguration {
    DeviceAllocationConfiguration {
        source: if source { "FromClass" } else { "FromClaim" }.into(),
        requests,
        opaque: Some(OpaqueDeviceConfiguration {
            driver: if driver {
                "gpu.deckhouse.io"
            } else {
                "other.example.com"
            }
            .into(),
            parameters: RawExtension(parameters),
        }),
    }
}

#[test]
fn property_any_config_list_picks_one_config_or_names_the_bad_one() {
    let request_names = proptest::option::of(proptest::collection::vec(
        prop_oneof![Just("gpu".to_owned()), Just("gpu/a".to_owned()), any::<String>()],
        0..3,
    ));
    let entry = (
        any::<bool>(),
        any::<bool>(),
        request_names,
        prop_oneof![json(), config_like()],
    )
        .prop_map(|(source, driver, requests, parameters)| allocation_config(source, driver, requests, parameters));
    let inputs = (
        proptest::collection::vec(entry, 0..6),
        prop_oneof![Just("gpu"), Just("gpu/a"), Just("")],
    );
    check("opaque config precedence", file!(), inputs, |(configs, request)| {
        let chosen = config_for_request(&configs, "gpu.deckhouse.io", request);
        let vfio = class_allows_vfio(&configs, "gpu.deckhouse.io", request);
        match chosen {
            Err(error) => ensure(error.position < configs.len(), || {
                format!("position {} of {}", error.position, configs.len())
            }),
            // A class that allows VFIO has a VfioDeviceConfig among the configs that apply.
            Ok(_) => ensure(!vfio || configs.iter().any(|c| c.source == "FromClass"), || {
                "vfio without a class config".into()
            }),
        }
    });
}
