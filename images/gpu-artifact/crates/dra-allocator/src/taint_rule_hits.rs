//! Which admin DeviceTaintRules select which devices (see `taint_rules`), worked out again when
//! the rules, the classes or the slices change, and only while there are rules: with none the
//! engine does no work for them.

use std::collections::HashMap;
use std::sync::Arc;

use dra_cel::{CelError, SelectorCache};
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceTaint};

use crate::allocator::Allocator;
use crate::candidates::context_as;
use crate::inventory::Inventory;
use crate::taint_rules::{RuleHits, TaintRule, TaintRuleSelector};

/// A rule as the search reads it: its name, its taint, and whether a selector of it does not
/// compile (then the devices it reaches are never allocated, as the scheduler does not see them).
pub(crate) struct AppliedRule {
    pub name: Arc<str>,
    pub taint: DeviceTaint,
    pub broken: bool,
}

/// Whether every expression matches the device in `slot`, in order as `applyPatches` checks them,
/// on the device as it hands it to CEL there: driver, attributes and capacity, and no
/// `allowMultipleAllocations` (`cel.Device` without it reads false, cel/compile.go v0.34.4):
/// `Err` when one it reaches does not compile; a runtime error or a mismatch ends the check with
/// "not selected" before the later ones are compiled.
fn all_match(cel: &SelectorCache, inventory: &Inventory, slot: u32, expressions: &[&str]) -> Result<bool, CelError> {
    let mut device = None;
    for expression in expressions {
        let compiled = cel.get_or_compile(expression)?;
        let Ok(device) = device.get_or_insert_with(|| context_as(cel, inventory, slot, false)) else {
            return Ok(false);
        };
        if compiled.matches(device) != Ok(true) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether `selector` selects the device in `slot` (`Err`: an expression does not compile).
fn selects(
    selector: &TaintRuleSelector,
    classes: &HashMap<String, DeviceClass>,
    cel: &SelectorCache,
    inventory: &Inventory,
    slot: u32,
) -> Result<bool, CelError> {
    let device = inventory.device(slot);
    let pool = inventory.pool(device.pool);
    let names_match = selector.driver.as_deref().is_none_or(|d| d == &*pool.driver)
        && selector.pool.as_deref().is_none_or(|p| p == &*pool.name)
        && selector.device.as_deref().is_none_or(|n| n == &**device.raw.name());
    if !names_match {
        return Ok(false);
    }
    if let Some(class) = &selector.device_class_name {
        let Some(class) = classes.get(class) else {
            return Ok(false);
        };
        let expressions: Vec<&str> = class
            .spec
            .selectors
            .iter()
            .flatten()
            .filter_map(|s| s.cel.as_ref().map(|c| c.expression.as_str()))
            .collect();
        if !all_match(cel, inventory, slot, &expressions)? {
            return Ok(false);
        }
    }
    let own: Vec<&str> = selector.cel.iter().map(String::as_str).collect();
    all_match(cel, inventory, slot, &own)
}

impl Allocator {
    /// Replaces the admin DeviceTaintRules the engine honours (see `taint_rules`).
    pub fn set_taint_rules(&mut self, rules: Vec<TaintRule>) {
        self.taint_rules = rules;
        self.refresh_rule_hits();
        self.memo.clear();
    }

    /// Works out again which rules select which devices.
    pub(crate) fn refresh_rule_hits(&mut self) {
        let mut applied = Vec::with_capacity(self.taint_rules.len());
        let mut hits: HashMap<u32, RuleHits> = HashMap::new();
        for (index, rule) in self.taint_rules.iter().enumerate() {
            let mut broken = false;
            if let Some(selector) = &rule.selector {
                for slot in 0..self.inventory.devices.len() as u32 {
                    if self.inventory.devices[slot as usize].is_none() {
                        continue;
                    }
                    let selected = selects(selector, &self.classes, &self.cel, &self.inventory, slot);
                    broken |= selected.is_err();
                    if selected != Ok(false) {
                        hits.entry(slot).or_default().push(index as u32);
                    }
                }
            }
            applied.push(AppliedRule {
                name: Arc::from(rule.name.as_str()),
                taint: rule.taint.clone(),
                broken,
            });
        }
        self.inventory.rule_hits = hits;
        let was_broken = self.inventory.taint_rules.iter().map(|r| r.broken);
        if !was_broken.eq(applied.iter().map(|r| r.broken)) {
            // A rule that stops compiling (or compiles again) changes devices on every node.
            self.memo.clear();
        }
        self.inventory.taint_rules = applied;
    }
}
