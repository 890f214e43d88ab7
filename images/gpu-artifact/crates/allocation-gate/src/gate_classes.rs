//! Which DeviceClasses send their Pods through best fit: the classes of our driver (as
//! gpu-dra-controller decides "ours") that do not opt out, and the extended resources that name
//! them. A class opts out by `gpu.deckhouse.io/allocation-policy: FirstFit` (what gpu-controller
//! renders from `GPUClass.spec.allocationPolicy`) or, on a hand-written DeviceClass, also by
//! `gpu.deckhouse.io/best-fit: "false"`.

use std::collections::{BTreeMap, BTreeSet};

use claim_allocation::selection::is_our_class;
use gpu_api::labels::ALLOCATION_POLICY_ANNOTATION;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::ResourceExt;

/// A DeviceClass annotated with this key and the value `"false"` keeps its Pods out of best fit:
/// they get no scheduling gate, and the scheduler allocates their claims first fit.
pub const BEST_FIT_ANNOTATION: &str = "gpu.deckhouse.io/best-fit";
/// Every DeviceClass may also be requested as the extended resource of this prefix and its name.
pub const IMPLICIT_EXTENDED_RESOURCE_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The classes whose Pods get the gate, by name, and by the extended resources that request them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateClasses {
    classes: BTreeSet<String>,
    extended_resources: BTreeMap<String, String>,
}

/// True when the class keeps its Pods out of best fit.
pub fn opted_out(class: &DeviceClass) -> bool {
    let annotations = class.annotations();
    let first_fit = annotations
        .get(ALLOCATION_POLICY_ANNOTATION)
        .is_some_and(|v| v.trim() == "FirstFit");
    let no_best_fit = annotations
        .get(BEST_FIT_ANNOTATION)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"));
    first_fit || no_best_fit
}

impl GateClasses {
    pub fn new<'a>(classes: impl IntoIterator<Item = &'a DeviceClass>) -> Self {
        let mut gate = Self::default();
        for class in classes {
            if !is_our_class(class) || opted_out(class) {
                continue;
            }
            let name = class.name_any();
            if let Some(resource) = class.spec.extended_resource_name.as_ref().filter(|r| !r.is_empty()) {
                gate.extended_resources.insert(resource.clone(), name.clone());
            }
            gate.classes.insert(name);
        }
        gate
    }

    /// True when a request of this class sends its Pod through best fit.
    pub fn gates(&self, class: &str) -> bool {
        self.classes.contains(class)
    }

    /// The class an extended resource of a container requests, when that class gates.
    pub fn class_of_extended_resource(&self, resource: &str) -> Option<&str> {
        if let Some(class) = self.extended_resources.get(resource) {
            return Some(class);
        }
        let class = resource.strip_prefix(IMPLICIT_EXTENDED_RESOURCE_PREFIX)?;
        self.classes.get(class).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn class(name: &str, driver: &str, annotations: serde_json::Value, extended: Option<&str>) -> DeviceClass {
        serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}],
                "extendedResourceName": extended,
            }
        }))
        .unwrap()
    }

    #[test]
    fn our_classes_gate_unless_they_opt_out() {
        let classes = [
            class("a30", "gpu.deckhouse.io", json!({}), Some("example.com/gpu")),
            class("mig", "gpu.deckhouse.io", json!({BEST_FIT_ANNOTATION: "true"}), None),
            class(
                "legacy",
                "gpu.deckhouse.io",
                json!({BEST_FIT_ANNOTATION: "False"}),
                Some("example.com/old"),
            ),
            class("nic", "net.example.com", json!({}), Some("example.com/nic")),
            class(
                "first-fit",
                "gpu.deckhouse.io",
                json!({ALLOCATION_POLICY_ANNOTATION: "FirstFit"}),
                None,
            ),
            class(
                "best-fit",
                "gpu.deckhouse.io",
                json!({ALLOCATION_POLICY_ANNOTATION: "BestFit"}),
                None,
            ),
        ];
        let gate = GateClasses::new(&classes);
        assert!(gate.gates("a30"));
        assert!(gate.gates("mig"));
        assert!(!gate.gates("legacy"), "opted out by annotation");
        assert!(!gate.gates("nic"), "another driver's class");
        assert!(!gate.gates("first-fit"), "GPUClass allocationPolicy FirstFit");
        assert!(gate.gates("best-fit"));
        assert!(!gate.gates("missing"));
        assert_eq!(gate.class_of_extended_resource("example.com/gpu"), Some("a30"));
        assert_eq!(gate.class_of_extended_resource("example.com/old"), None);
        assert_eq!(gate.class_of_extended_resource("example.com/nic"), None);
        assert_eq!(
            gate.class_of_extended_resource("deviceclass.resource.kubernetes.io/mig"),
            Some("mig")
        );
        assert_eq!(
            gate.class_of_extended_resource("deviceclass.resource.kubernetes.io/legacy"),
            None
        );
        assert_eq!(gate.class_of_extended_resource("nvidia.com/gpu"), None);
    }
}
