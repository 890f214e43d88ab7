//! Admin DeviceTaintRules, applied as the kube-scheduler applies them: a device a rule selects
//! carries the rule's taint, beside the taints of its slice. Upstream does this in the
//! ResourceSlice tracker (`k8s.io/dynamic-resource-allocation/resourceslice/tracker`,
//! `Tracker.applyPatches`), which hands the allocator slices patched with the rules' taints; we
//! keep, per device slot, which rules select it, and `search` checks those taints with the slice's.
//!
//! The selector differs by release:
//! - 1.34 (`resource.k8s.io/v1alpha3`, tracker v0.34.4): `driver`, `pool`, `device`, a
//!   `deviceClassName` whose CEL selectors must all match (a class that does not exist selects
//!   nothing), and CEL `selectors` that must all match. A rule without a selector taints every
//!   device (no nil check in `applyPatches`). A CEL runtime error means "not selected"; an
//!   expression that does not compile fails the patching of the slice, so the scheduler does
//!   not see its devices: we never allocate a device such a rule reaches.
//! - 1.37 (`resource.k8s.io/v1`, tracker v0.37.2): only `driver`, `pool` and `device`; a rule
//!   without a selector selects nothing ("No selector matches no devices.").

use k8s_openapi::api::resource::v1::DeviceTaint;
use k8s_openapi::api::resource::v1alpha3::{DeviceTaintRule as V1alpha3Rule, DeviceTaintRuleSpec};

/// One DeviceTaintRule, whichever version served it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaintRule {
    pub name: String,
    /// `None`: the rule selects no device.
    pub selector: Option<TaintRuleSelector>,
    pub taint: DeviceTaint,
}

/// What a rule selects; every field set must match (an empty selector selects every device).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TaintRuleSelector {
    pub driver: Option<String>,
    pub pool: Option<String>,
    pub device: Option<String>,
    /// 1.34 only: the named class's CEL selectors must all match.
    pub device_class_name: Option<String>,
    /// 1.34 only: CEL expressions that must all match.
    pub cel: Vec<String>,
}

fn taint_of(spec: &DeviceTaintRuleSpec) -> DeviceTaint {
    let taint = &spec.taint;
    DeviceTaint {
        effect: taint.effect.clone(),
        key: taint.key.clone(),
        time_added: taint.time_added.clone(),
        value: taint.value.clone(),
    }
}

impl TaintRule {
    /// A `resource.k8s.io/v1alpha3` rule, as the 1.34 scheduler reads it.
    pub fn from_v1alpha3(rule: &V1alpha3Rule) -> TaintRule {
        let spec = &rule.spec;
        let selector = spec
            .device_selector
            .as_ref()
            .map_or_else(TaintRuleSelector::default, |s| TaintRuleSelector {
                driver: s.driver.clone(),
                pool: s.pool.clone(),
                device: s.device.clone(),
                device_class_name: s.device_class_name.clone(),
                cel: s
                    .selectors
                    .iter()
                    .flatten()
                    .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()))
                    .collect(),
            });
        TaintRule {
            name: rule.metadata.name.clone().unwrap_or_default(),
            selector: Some(selector),
            taint: taint_of(spec),
        }
    }

    /// A `resource.k8s.io/v1` rule (1.37), its spec decoded into the v1alpha3 shape (v1's
    /// fields are a subset of it): class and CEL selectors do not exist there and are dropped.
    pub fn from_v1(name: &str, spec: &DeviceTaintRuleSpec) -> TaintRule {
        TaintRule {
            name: name.to_owned(),
            selector: spec.device_selector.as_ref().map(|s| TaintRuleSelector {
                driver: s.driver.clone(),
                pool: s.pool.clone(),
                device: s.device.clone(),
                device_class_name: None,
                cel: Vec::new(),
            }),
            taint: taint_of(spec),
        }
    }
}

/// Which rules select one device, by position in the engine's rule list.
pub(crate) type RuleHits = Vec<u32>;

/// Only the effects the scheduler knows prevent allocation; others (1.37's `None`) are ignored
/// (`taintPreventsAllocation`, structured/internal/stable/allocator_stable.go, v0.37.2).
pub(crate) fn prevents_allocation(taint: &DeviceTaint) -> bool {
    matches!(taint.effect.as_str(), "NoSchedule" | "NoExecute")
}
