//! Device taints and request tolerations, as `resourceclaim.ToleratesTaint`: every taint of a
//! device (its slice's and those of the admin DeviceTaintRules that select it) must be tolerated
//! by some toleration of the request.

use k8s_openapi::api::core::v1::{Taint, Toleration};
use k8s_openapi::api::resource::v1::{DeviceTaint, DeviceToleration};

use crate::inventory::Inventory;
use crate::taint_rule_hits::AppliedRule;
use crate::taint_rules::prevents_allocation;

/// What a toleration says, in the fields device and Node tolerations share.
pub struct TolerationFields<'a> {
    pub effect: Option<&'a str>,
    pub key: Option<&'a str>,
    pub operator: Option<&'a str>,
    pub value: Option<&'a str>,
}

/// What a taint says, in the fields device and Node taints share.
pub struct TaintFields<'a> {
    pub effect: &'a str,
    pub key: &'a str,
    pub value: Option<&'a str>,
}

/// The rule the scheduler applies to device and Node taints alike: the effect matches (or the
/// toleration names none), and the key and value match by the operator (`Exists` with no key
/// tolerates every taint).
pub fn tolerates_taint(toleration: TolerationFields<'_>, taint: TaintFields<'_>) -> bool {
    if let Some(effect) = toleration.effect
        && !effect.is_empty()
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.unwrap_or_default();
    match toleration.operator.unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        "Equal" => key == taint.key && toleration.value.unwrap_or_default() == taint.value.unwrap_or_default(),
        _ => false,
    }
}

/// Device and Node tolerations carry the same four optional fields, their taints the same three.
macro_rules! shared_fields {
    ($toleration:ty, $taint:ty) => {
        impl<'a> From<&'a $toleration> for TolerationFields<'a> {
            fn from(toleration: &'a $toleration) -> Self {
                TolerationFields {
                    effect: toleration.effect.as_deref(),
                    key: toleration.key.as_deref(),
                    operator: toleration.operator.as_deref(),
                    value: toleration.value.as_deref(),
                }
            }
        }

        impl<'a> From<&'a $taint> for TaintFields<'a> {
            fn from(taint: &'a $taint) -> Self {
                TaintFields {
                    effect: &taint.effect,
                    key: &taint.key,
                    value: taint.value.as_deref(),
                }
            }
        }
    };
}

shared_fields!(DeviceToleration, DeviceTaint);
shared_fields!(Toleration, Taint);

fn tolerates(toleration: &DeviceToleration, taint: &DeviceTaint) -> bool {
    tolerates_taint(toleration.into(), taint.into())
}

/// Whether `taint` keeps a request with `tolerations` off its device.
fn blocks(taint: &DeviceTaint, tolerations: &[DeviceToleration]) -> bool {
    prevents_allocation(taint) && !tolerations.iter().any(|t| tolerates(t, taint))
}

impl Inventory {
    /// Whether a request with `tolerations` may have the device in `slot`: every taint of its
    /// slice and of the admin rules that select it is tolerated, and no rule that selects it
    /// has a selector that does not compile.
    pub(crate) fn tolerated(&self, slot: u32, tolerations: &[DeviceToleration]) -> bool {
        let slice_taints = self.device(slot).raw.taints().unwrap_or_default();
        if slice_taints.iter().any(|t| blocks(t, tolerations)) {
            return false;
        }
        self.rules_of(slot)
            .all(|rule| !rule.broken && !blocks(&rule.taint, tolerations))
    }

    /// What keeps a request with `tolerations` off the device in `slot`, as a user reads it:
    /// `DeviceTaintRule <name>` for an admin rule, `taint <key>=<value>:<effect>` for its slice's.
    pub(crate) fn untolerated(&self, slot: u32, tolerations: &[DeviceToleration]) -> Vec<String> {
        let slice_taints = self.device(slot).raw.taints().unwrap_or_default();
        let from_slice = slice_taints.iter().filter(|t| blocks(t, tolerations)).map(|t| {
            format!(
                "taint {}={}:{}",
                t.key,
                t.value.as_deref().unwrap_or_default(),
                t.effect
            )
        });
        let from_rules = self
            .rules_of(slot)
            .filter(|rule| rule.broken || blocks(&rule.taint, tolerations))
            .map(|rule| format!("DeviceTaintRule {}", rule.name));
        from_slice.chain(from_rules).collect()
    }

    fn rules_of(&self, slot: u32) -> impl Iterator<Item = &AppliedRule> {
        self.rule_hits
            .get(&slot)
            .into_iter()
            .flatten()
            .map(|index| &self.taint_rules[*index as usize])
    }
}
