//! A known difference of v0.34.4: its `checkAvailableCounters` (structured/internal/experimental,
//! allocator_experimental.go) counts only devices allocated whole (`AllocatedDevices`), not the
//! shares of a device that allows multiple allocations (`AllocatedSharedDeviceIDs`); v0.37.2 counts
//! both (`internal.IsDeviceAllocated`), as ours does. So v0.34.4 hands out another offer of a card
//! whose counters shares already hold: counted here, whether the choice holds the card (which the
//! audit would call unsafe) or only reaches it with admin access (which it would not).

use std::collections::BTreeSet;

use serde_json::Value;

/// `(pool, counter set)` of every device `(pool, device)` in `devices`, from `slices`.
fn counter_sets(slices: &[Value], devices: &BTreeSet<(String, String)>) -> BTreeSet<(String, String)> {
    let mut sets = BTreeSet::new();
    for slice in slices {
        let pool = slice["spec"]["pool"]["name"].as_str().unwrap_or_default();
        for device in slice["spec"]["devices"].as_array().into_iter().flatten() {
            let name = device["name"].as_str().unwrap_or_default();
            if !devices.contains(&(pool.to_owned(), name.to_owned())) {
                continue;
            }
            for consumption in device["consumesCounters"].as_array().into_iter().flatten() {
                let set = consumption["counterSet"].as_str().unwrap_or_default();
                sets.insert((pool.to_owned(), set.to_owned()));
            }
        }
    }
    sets
}

/// `(pool, device)` of the results of `allocation` that `keep` selects.
fn devices_of(allocation: &Value, keep: impl Fn(&Value) -> bool) -> BTreeSet<(String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    allocation["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| keep(r))
        .map(|r| (text(&r["pool"]), text(&r["device"])))
        .collect()
}

/// Whether Go's `allocation` takes a device whose counters a share of the `allocated` claims holds.
pub fn takes_counters_of_a_share(slices: &[Value], allocated: &[Value], allocation: &Value) -> bool {
    let shares: BTreeSet<(String, String)> = allocated
        .iter()
        .flat_map(|claim| devices_of(&claim["status"]["allocation"], |r| r["shareID"].is_string()))
        .collect();
    if shares.is_empty() {
        return false;
    }
    let held = counter_sets(slices, &shares);
    let taken = counter_sets(slices, &devices_of(allocation, |_| true));
    !held.is_disjoint(&taken)
}
