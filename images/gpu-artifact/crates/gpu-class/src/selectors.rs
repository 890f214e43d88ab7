//! The CEL selectors of a GPUClass's DeviceClass, one per concern, in Kubernetes CEL (attributes
//! keyed by domain, then name). The first selector checks the driver: the scheduler evaluates a
//! class's selectors in order and stops at the first false, so every later one only ever meets
//! devices of our driver. Attributes a device may lack (`ccMajor`, `baremetal`) are tested with
//! `in` first, because a missing key is a runtime error that fails the whole allocation.

use gpu_api::opaque_config::SharingStrategy;
use gpu_api::{ClassDeviceType, GPUClassSpec};

use crate::label_selection::LabelSelection;

/// Our devices' attributes, as Kubernetes CEL reads them.
const ATTRIBUTES: &str = r#"device.attributes["gpu.deckhouse.io"]"#;
/// Our devices' capacities.
const CAPACITY: &str = r#"device.capacity["gpu.deckhouse.io"]"#;

/// The selectors of `spec` with the labels already resolved. `requirements` were parsed by the
/// validation (`memory` and `compute capability` given as checked).
pub(crate) fn class_selectors(
    spec: &GPUClassSpec,
    labels: &LabelSelection,
    checked: &CheckedRequirements,
) -> Vec<String> {
    let mut selectors = vec![format!("device.driver == {}", cel_string(gpu_api::DRIVER_NAME))];
    match spec.device_type {
        ClassDeviceType::Physical => {
            selectors.push(format!("{ATTRIBUTES}.deviceType == \"Physical\""));
            let strategy = spec.sharing.as_ref().map_or(SharingStrategy::Exclusive, |s| s.strategy);
            selectors.push(format!("{ATTRIBUTES}.sharing == {}", cel_string(strategy.as_str())));
        }
        ClassDeviceType::Mig => {
            let profile = spec
                .nvidia
                .as_ref()
                .and_then(|n| n.mig.as_ref())
                .map(|m| m.profile.as_str())
                .unwrap_or_default();
            selectors.push(format!(
                "{ATTRIBUTES}.deviceType == \"MIG\" && {ATTRIBUTES}.migProfile == {}",
                cel_string(profile)
            ));
        }
    }
    if let Some(vendor) = spec.vendor {
        selectors.push(format!(
            "{ATTRIBUTES}.vendor == {}",
            cel_string(vendor.attribute_value())
        ));
    }
    if let Some(memory) = &checked.min_memory {
        selectors.push(format!(
            "{CAPACITY}.memory.compareTo(quantity({})) >= 0",
            cel_string(memory)
        ));
    }
    if let Some((major, minor)) = checked.min_compute_capability {
        selectors.push(format!(
            "\"ccMajor\" in {ATTRIBUTES} && \"ccMinor\" in {ATTRIBUTES} && ({ATTRIBUTES}.ccMajor > {major} || \
             ({ATTRIBUTES}.ccMajor == {major} && {ATTRIBUTES}.ccMinor >= {minor}))"
        ));
    }
    if spec.vfio == Some(true) {
        selectors.push(format!(
            "\"baremetal\" in {ATTRIBUTES} && {ATTRIBUTES}.baremetal == true"
        ));
    }
    for (attribute, value) in &labels.attributes {
        selectors.push(format!("{ATTRIBUTES}.{attribute} == {}", cel_string(value)));
    }
    if let Some(names) = &labels.physical_gpus {
        let list: Vec<String> = names.iter().map(|name| cel_string(name)).collect();
        selectors.push(format!("{ATTRIBUTES}.physicalGPU in [{}]", list.join(", ")));
    }
    selectors
}

/// The requirements in the form the selectors need, once the validation has parsed them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct CheckedRequirements {
    pub min_memory: Option<String>,
    pub min_compute_capability: Option<(u32, u32)>,
}

/// A CEL string literal of `text`: double-quoted, with quotes, backslashes and control characters
/// escaped.
pub(crate) fn cel_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_and_escaped() {
        assert_eq!(cel_string("a30-pcie"), r#""a30-pcie""#);
        assert_eq!(cel_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(cel_string("x\ny"), r#""x\ny""#);
    }
}
