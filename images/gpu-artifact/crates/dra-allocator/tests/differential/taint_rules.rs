//! Random admin DeviceTaintRules for the differential test, in the version each release serves
//! (`resource.k8s.io/v1alpha3` on 1.34, `v1` on 1.37), and tolerations of them in the claims. Go
//! applies them with upstream's own ResourceSlice tracker (tools/allocator-harness,
//! taint_rules_*.go); ours with `Allocator::set_taint_rules`.

use allocator_workloads::{DRIVER, Rng};
use dra_allocator::{Allocator, TaintRule};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

use crate::case::{Unit, pool_of};
use crate::ours::from;

/// Percent of cases with DeviceTaintRules.
const RULE_CASE_PERCENT: u64 = 35;
const KEY: &str = "example.com/maintenance";

/// A selector picking one device, one pool, the driver, (1.34 only) a class or a CEL selector,
/// or nothing at all.
fn selector(rng: &mut Rng, units: &[Unit], v1alpha3: bool) -> Value {
    let slices: Vec<&Value> = units
        .iter()
        .flat_map(|u| &u.slices)
        .filter(|s| s["spec"]["devices"].as_array().is_some_and(|d| !d.is_empty()))
        .collect();
    let kinds = if v1alpha3 { 6 } else { 4 };
    match rng.below(kinds) {
        0 | 1 if !slices.is_empty() => {
            let slice = slices[rng.below(slices.len() as u64) as usize];
            let (driver, pool) = pool_of(slice);
            let devices = slice["spec"]["devices"].as_array().expect("filtered above");
            let device = &devices[rng.below(devices.len() as u64) as usize]["name"];
            if rng.chance(50) {
                json!({"driver": driver, "pool": pool, "device": device})
            } else {
                json!({"pool": pool})
            }
        }
        2 => json!({"driver": DRIVER}),
        4 => {
            let class = ["gpu-mig", "gpu-physical", "gpu-shared", "gpu-any"][rng.below(4) as usize];
            json!({"deviceClassName": class})
        }
        5 => {
            let gi = [10, 20, 40][rng.below(3) as usize];
            let expression = format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{gi}Gi\")) >= 0");
            json!({"selectors": [{"cel": {"expression": expression}}]})
        }
        _ => json!({"device": "no-such-device"}),
    }
}

/// 1-2 rules in some cases, none in the others.
pub fn rules(rng: &mut Rng, version: &str, units: &[Unit]) -> Vec<Value> {
    if !rng.chance(RULE_CASE_PERCENT) {
        return Vec::new();
    }
    let v1alpha3 = version == "0.34.4";
    let api = if v1alpha3 { "v1alpha3" } else { "v1" };
    (0..1 + rng.below(2))
        .map(|i| {
            let effect = if rng.chance(70) { "NoSchedule" } else { "NoExecute" };
            json!({"apiVersion": format!("resource.k8s.io/{api}"), "kind": "DeviceTaintRule",
                "metadata": {"name": format!("rule-{i}")},
                "spec": {"deviceSelector": selector(rng, units, v1alpha3),
                         "taint": {"key": KEY, "value": "planned", "effect": effect}}})
        })
        .collect()
}

/// Some requests of `claim` (and subrequests) tolerate the rules' taint.
pub fn tolerate_some(rng: &mut Rng, claim: &mut Value) {
    for request in claim["spec"]["devices"]["requests"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let exacts: Vec<&mut Value> = if request["firstAvailable"].is_array() {
            request["firstAvailable"]
                .as_array_mut()
                .expect("an array")
                .iter_mut()
                .collect()
        } else {
            vec![&mut request["exactly"]]
        };
        for exact in exacts {
            if rng.chance(30) {
                let toleration = json!({"key": KEY, "operator": "Exists"});
                match exact["tolerations"].as_array_mut() {
                    Some(list) => list.push(toleration),
                    None => exact["tolerations"] = json!([toleration]),
                }
            }
        }
    }
}

/// The rules as ours reads them, as the controller converts what the API server serves.
pub fn ours(version: &str, rules: &[Value]) -> Vec<TaintRule> {
    rules
        .iter()
        .map(|rule| {
            if version == "0.34.4" {
                TaintRule::from_v1alpha3(&from(rule))
            } else {
                TaintRule::from_v1(
                    rule["metadata"]["name"].as_str().unwrap_or_default(),
                    &from(&rule["spec"]),
                )
            }
        })
        .collect()
}

/// Whether the rules change what ours gives the case's first claim: the generator's rules must
/// keep claims off devices now and then, or the comparison says nothing about them.
pub fn change_the_first_claim(case: &crate::case::Case, classes: &[Value]) -> bool {
    let Some(first) = case.claims.first() else {
        return false;
    };
    if case.taint_rules.is_empty() {
        return false;
    }
    let slices: Vec<ResourceSlice> = case.slices().iter().map(from).collect();
    let classes: Vec<DeviceClass> = classes.iter().map(from).collect();
    let claim: ResourceClaim = from(first);
    let mut plain = Allocator::new(&slices, &classes, &[]);
    let mut ruled = Allocator::new(&slices, &classes, &[]);
    ruled.set_taint_rules(ours(case.version, &case.taint_rules));
    plain.allocate(&claim, None).ok() != ruled.allocate(&claim, None).ok()
}
