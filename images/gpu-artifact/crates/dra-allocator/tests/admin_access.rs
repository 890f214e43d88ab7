//! Admin access as the scheduler's allocator (v0.34.4 experimental, v0.37.2 incubating) grants
//! it: the device need not be free, but while the claim is allocated the device serves one pick
//! of the claim and its counters are charged like any other pick's, so an admin request cannot
//! take a partition whose counters the same allocation, or other claims' allocations, have used.
//! A committed admin result takes nothing.

use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

/// One card with two memory slices: `whole-mig` takes both, `mig-0` and `mig-1` one each, and
/// `probe` (a monitoring endpoint) takes no counters.
fn card() -> ResourceSlice {
    let dev = |name: &str, slices: &[u32]| {
        let mut d = json!({"name": name, "attributes": {"id": {"string": name}}});
        if !slices.is_empty() {
            let counters: serde_json::Map<String, Value> = slices
                .iter()
                .map(|i| (format!("memory-slice-{i}"), json!({"value": "1"})))
                .collect();
            d["consumesCounters"] = json!([{"counterSet": "pgpu-0", "counters": counters}]);
        }
        d
    };
    from(json!({"metadata": {"name": "node-a-gpu0"}, "spec": {
        "driver": "gpu.deckhouse.io", "nodeName": "node-a", "pool": {"name": "gpus/node-a", "generation": 1, "resourceSliceCount": 1},
        "sharedCounters": [{"name": "pgpu-0", "counters": {"memory-slice-0": {"value": "1"}, "memory-slice-1": {"value": "1"}}}],
        "devices": [dev("whole-mig", &[0, 1]), dev("mig-0", &[0]), dev("mig-1", &[1]), dev("probe", &[])]}}))
}

fn class() -> DeviceClass {
    from(
        json!({"metadata": {"name": "gpu"}, "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.deckhouse.io\""}}]}}),
    )
}

/// A claim with one request per `(device, admin)`, each pinned to that device by its `id`.
fn claim(name: &str, requests: &[(&str, bool)]) -> ResourceClaim {
    let requests: Vec<Value> = requests
        .iter()
        .enumerate()
        .map(|(i, (device, admin))| {
            let selector = format!("device.attributes[\"gpu.deckhouse.io\"].id == \"{device}\"");
            json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "gpu", "allocationMode": "ExactCount",
                "count": 1, "adminAccess": admin, "selectors": [{"cel": {"expression": selector}}]}})
        })
        .collect();
    from(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": requests}}}))
}

fn allocator() -> Allocator {
    Allocator::new(&[card()], &[class()], &[])
}

fn devices(result: &AllocationResult) -> Vec<(String, Option<bool>)> {
    let results = result.devices.as_ref().unwrap().results.as_ref().unwrap();
    results.iter().map(|r| (r.device.clone(), r.admin_access)).collect()
}

#[test]
fn admin_access_to_a_free_partition_is_granted_and_marked() {
    let result = allocator()
        .allocate(&claim("admin", &[("mig-0", true)]), None)
        .unwrap()
        .unwrap();
    assert_eq!(devices(&result), vec![("mig-0".to_owned(), Some(true))]);
}

#[test]
fn admin_access_cannot_take_counters_a_partition_of_the_same_claim_took() {
    let mut allocator = allocator();
    let found = allocator
        .allocate(&claim("c", &[("whole-mig", false), ("mig-0", true)]), None)
        .unwrap();
    assert!(found.is_none(), "whole-mig used memory-slice-0 already: {found:?}");
}

#[test]
fn a_partition_cannot_take_counters_an_admin_request_of_the_same_claim_took() {
    let mut allocator = allocator();
    let found = allocator
        .allocate(&claim("c", &[("mig-0", true), ("whole-mig", false)]), None)
        .unwrap();
    assert!(
        found.is_none(),
        "the admin pick of mig-0 holds memory-slice-0: {found:?}"
    );
    let disjoint = allocator
        .allocate(&claim("c", &[("mig-0", true), ("mig-1", false)]), None)
        .unwrap()
        .unwrap();
    assert_eq!(
        devices(&disjoint),
        vec![("mig-0".to_owned(), Some(true)), ("mig-1".to_owned(), None)]
    );
}

#[test]
fn admin_access_cannot_take_counters_another_claim_holds() {
    let mut allocator = allocator();
    let whole = allocator
        .allocate(&claim("whole", &[("whole-mig", false)]), None)
        .unwrap()
        .unwrap();
    allocator.commit(&whole);
    for device in ["mig-0", "mig-1", "whole-mig"] {
        let found = allocator.allocate(&claim("admin", &[(device, true)]), None).unwrap();
        assert!(
            found.is_none(),
            "{device}: its counters are used up by whole-mig (the scheduler charges them again for admin access)"
        );
    }
}

#[test]
fn admin_access_needs_no_free_device_and_a_committed_one_takes_nothing() {
    let mut allocator = allocator();
    let user = allocator
        .allocate(&claim("user", &[("probe", false)]), None)
        .unwrap()
        .unwrap();
    allocator.commit(&user);
    let admin = allocator
        .allocate(&claim("admin", &[("mig-0", true)]), None)
        .unwrap()
        .unwrap();
    allocator.commit(&admin);
    let probe = allocator.allocate(&claim("monitor", &[("probe", true)]), None).unwrap();
    assert!(probe.is_some(), "admin access does not need the device free");
    let after = allocator
        .allocate(&claim("next", &[("whole-mig", false)]), None)
        .unwrap();
    assert!(
        after.is_some(),
        "the committed admin result of mig-0 holds no counters: {after:?}"
    );
}

#[test]
fn a_device_serves_one_pick_of_a_claim_even_with_admin_access() {
    let mut allocator = allocator();
    for requests in [[("probe", true), ("probe", false)], [("probe", false), ("probe", true)]] {
        let found = allocator.allocate(&claim("c", &requests), None).unwrap();
        assert!(found.is_none(), "{requests:?}: probe was picked twice: {found:?}");
    }
}
