//! Selectors as DeviceClasses and claims write them, evaluated against one A100 MIG offer.

use std::collections::BTreeMap;

use dra_cel::{CelError, SelectorCache};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn a100_mig_offer() -> Device {
    let mut attributes = BTreeMap::new();
    let s = |v: &str| DeviceAttribute {
        string: Some(v.to_owned()),
        ..Default::default()
    };
    attributes.insert("deviceType".to_owned(), s("MIG"));
    attributes.insert("gpu.deckhouse.io/migProfile".to_owned(), s("2g.20gb"));
    attributes.insert(
        "ccMajor".to_owned(),
        DeviceAttribute {
            int: Some(8),
            ..Default::default()
        },
    );
    attributes.insert(
        "baremetal".to_owned(),
        DeviceAttribute {
            bool: Some(true),
            ..Default::default()
        },
    );
    attributes.insert(
        "driverVersion".to_owned(),
        DeviceAttribute {
            version: Some("580.65.6".to_owned()),
            ..Default::default()
        },
    );
    attributes.insert("resource.kubernetes.io/pciBusID".to_owned(), s("0000:3b:00.0"));
    let mut capacity = BTreeMap::new();
    capacity.insert(
        "memory".to_owned(),
        DeviceCapacity {
            value: Quantity("20Gi".to_owned()),
            request_policy: None,
        },
    );
    Device {
        name: "gpu0-mig-2g20gb-0".to_owned(),
        attributes: Some(attributes),
        capacity: Some(capacity),
        ..Default::default()
    }
}

fn eval(expression: &str) -> Result<bool, CelError> {
    let cache = SelectorCache::new();
    let device = cache.device_context("gpu.deckhouse.io", &a100_mig_offer()).unwrap();
    cache.get_or_compile(expression)?.matches(&device)
}

#[test]
fn kubernetes_selectors_match_like_the_scheduler() {
    let cases = [
        (r#"device.driver == "gpu.deckhouse.io""#, true),
        (r#"device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#, true),
        (
            r#"device.attributes["gpu.deckhouse.io"].migProfile.startsWith("2g.")"#,
            true,
        ),
        (
            r#"device.attributes["gpu.deckhouse.io"].ccMajor >= 8 && device.attributes["gpu.deckhouse.io"].baremetal"#,
            true,
        ),
        (
            r#"device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("12Gi")) >= 0"#,
            true,
        ),
        (
            r#"device.capacity["gpu.deckhouse.io"].memory.isGreaterThan(quantity("20Gi"))"#,
            false,
        ),
        (
            r#"device.capacity["gpu.deckhouse.io"].memory == quantity("21474836480")"#,
            true,
        ),
        (
            r#"device.capacity["gpu.deckhouse.io"].memory.asInteger() / 1073741824 == 20"#,
            true,
        ),
        (
            r#"device.attributes["gpu.deckhouse.io"].driverVersion.isGreaterThan(semver("550.0.0"))"#,
            true,
        ),
        (
            r#"device.attributes["gpu.deckhouse.io"].driverVersion.compareTo(semver("580.65.6")) == 0"#,
            true,
        ),
        (
            r#"device.attributes["gpu.deckhouse.io"].driverVersion.major() == 580"#,
            true,
        ),
        (
            r#"device.attributes["resource.kubernetes.io"].pciBusID.lowerAscii() == "0000:3b:00.0""#,
            true,
        ),
        (r#"has(device.attributes["gpu.deckhouse.io"].uuid)"#, false),
        (r#""gpu.deckhouse.io" in device.attributes"#, true),
        (r#"device.allowMultipleAllocations"#, false),
        (r#"isQuantity("1Gi") && !isSemver("1.2")"#, true),
        (r#""a-b".split("-").size() == 2"#, true),
        (
            r#"cel.bind(gpu, device.attributes["gpu.deckhouse.io"], gpu.deviceType == "MIG" && gpu.ccMajor == 8)"#,
            true,
        ),
        (r#"cel.bind(x, 2, x * x) == 4"#, true),
        (
            r#"device.attributes["gpu.deckhouse.io"].exists(k, k == "migProfile")"#,
            true,
        ),
    ];
    for (expression, want) in cases {
        assert_eq!(eval(expression), Ok(want), "{expression}");
    }
}

#[test]
fn compile_errors_carry_the_cel_text() {
    let err = eval(r#"device.driver == "#).unwrap_err();
    assert!(matches!(err, CelError::Compile { .. }), "{err:?}");
    assert!(err.to_string().contains("device.driver =="), "{err}");
}

#[test]
fn runtime_errors_carry_the_cel_text() {
    let err = eval(r#"device.attributes["gpu.deckhouse.io"].uuid == "x""#).unwrap_err();
    assert!(matches!(err, CelError::Runtime { .. }), "{err:?}");
    assert!(err.to_string().contains("uuid"), "{err}");
    let not_bool = eval(r#"device.driver"#).unwrap_err();
    assert!(not_bool.to_string().contains("bool"), "{not_bool}");
    let bad_quantity =
        eval(r#"device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("12 Gi")) > 0"#).unwrap_err();
    assert!(
        bad_quantity.to_string().contains("quantities must match"),
        "{bad_quantity}"
    );
}

#[test]
fn compiled_expressions_are_cached() {
    let cache = SelectorCache::new();
    let a = cache.get_or_compile("device.driver == 'x'").unwrap();
    let b = cache.get_or_compile("device.driver == 'x'").unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert!(cache.get_or_compile("(").is_err());
    assert!(cache.get_or_compile("(").is_err());
    assert_eq!(cache.len(), 2);
}
