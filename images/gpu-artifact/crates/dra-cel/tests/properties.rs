//! Bad input by the thousand for CEL selectors (what a DeviceClass or a claim writes): any text
//! compiles or is refused with the expression named, and a compiled selector evaluates against an
//! offer or fails naming the expression, never a panic or a stack overflow.

use std::collections::BTreeMap;

use dra_cel::{CelError, SelectorCache};
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};

const TOKENS: &[&str] = &[
    "device",
    ".attributes",
    ".capacity",
    "[\"gpu.deckhouse.io\"]",
    ".deviceType",
    ".memory",
    ".ccMajor",
    ".driverVersion",
    "==",
    "!=",
    "&&",
    "||",
    "!",
    "(",
    ")",
    "\"MIG\"",
    "8",
    "1.5",
    "true",
    "null",
    ".compareTo(quantity(\"1Gi\"))",
    "quantity(\"x\")",
    "semver(\"1.2.3\")",
    ".isGreaterThan(",
    ".all(x, x)",
    ".exists(k, k == \"a\")",
    "size(",
    "[",
    "]",
    "{",
    "}",
    ":",
    ",",
    "?",
    "+",
    "-",
    "*",
    "/",
    "%",
    "'",
    "\"",
    " in ",
    "device.driver",
    "cel",
    "matches(\"(a\")",
    ".map(x, x)",
    "dyn(",
    "int(",
    "\\u0000",
    "9223372036854775808",
];

fn expression() -> impl Strategy<Value = String> {
    let token = prop_oneof![8 => proptest::sample::select(TOKENS).prop_map(str::to_owned), 1 => any::<String>()];
    prop_oneof![
        6 => proptest::collection::vec(token, 0..24).prop_map(|tokens| tokens.concat()),
        1 => (1usize..400).prop_map(|depth| format!("{}true{}", "(".repeat(depth), ")".repeat(depth))),
        1 => (1usize..200).prop_map(|depth| "!".repeat(depth) + "true"),
    ]
}

fn offer() -> Device {
    let mut attributes = BTreeMap::new();
    attributes.insert(
        "deviceType".to_owned(),
        DeviceAttribute {
            string: Some("MIG".to_owned()),
            ..Default::default()
        },
    );
    attributes.insert(
        "ccMajor".to_owned(),
        DeviceAttribute {
            int: Some(8),
            ..Default::default()
        },
    );
    let mut capacity = BTreeMap::new();
    capacity.insert(
        "memory".to_owned(),
        DeviceCapacity {
            value: Quantity("20Gi".to_owned()),
            ..Default::default()
        },
    );
    Device {
        name: "gpu0-mig-2g20gb-0".to_owned(),
        attributes: Some(attributes),
        capacity: Some(capacity),
        ..Default::default()
    }
}

#[test]
fn property_any_selector_compiles_and_evaluates_or_names_the_expression() {
    // The cache keeps every compiled selector: start a new one now and then so a million cases
    // do not fill the memory.
    let cache = std::cell::RefCell::new(SelectorCache::new());
    let device = cache
        .borrow()
        .device_context("gpu.deckhouse.io", &offer())
        .unwrap_or_else(|error| panic!("the offer: {error}"));
    check("CEL selectors", file!(), expression(), |text| {
        if cache.borrow().len() > 4096 {
            cache.replace(SelectorCache::new());
        }
        let outcome = cache
            .borrow()
            .get_or_compile(&text)
            .and_then(|selector| selector.matches(&device));
        match outcome {
            Ok(_) => Ok(()),
            Err(CelError::Compile { expression, message } | CelError::Runtime { expression, message }) => {
                ensure(expression == text && !message.is_empty(), || {
                    format!("{text:?}: {expression:?}: {message}")
                })
            }
            Err(other) => ensure(false, || format!("{text:?}: {other}")),
        }
    });
}
