//! Did the API server keep our counters and sharing fields? A server whose
//! `DRAPartitionableDevices` gate is off accepts a ResourceSlice but silently drops
//! `sharedCounters` and `consumesCounters`; MIG offers would then overlap with nothing to keep them
//! apart. One whose `DRAConsumableCapacity` gate is off drops `allowMultipleAllocations` and
//! capacity `requestPolicy`; a shared offer would then be one more exclusive copy of the card.
//! Comparing what was sent with what was stored is the only way to tell.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Device, ResourceSlice};

/// Why counters are considered unsupported, when any counter field we sent is missing from what the
/// server stored; `None` when everything arrived (or nothing with counters was sent). Slices missing
/// from `stored` are not judged.
pub fn counters_dropped(sent: &[ResourceSlice], stored: &[ResourceSlice]) -> Option<String> {
    let stored: BTreeMap<&str, &ResourceSlice> = stored
        .iter()
        .filter_map(|slice| Some((slice.metadata.name.as_deref()?, slice)))
        .collect();
    let (mut sets_sent, mut sets_lost, mut consumers_sent, mut consumers_lost) = (0, 0, 0, 0);
    for slice in sent {
        let Some(kept) = slice.metadata.name.as_deref().and_then(|name| stored.get(name)) else {
            continue;
        };
        if has_items(&slice.spec.shared_counters) {
            sets_sent += 1;
            if !has_items(&kept.spec.shared_counters) {
                sets_lost += 1;
            }
        }
        let kept_devices: BTreeMap<&str, &Device> = kept
            .spec
            .devices
            .iter()
            .flatten()
            .map(|d| (d.name.as_str(), d))
            .collect();
        for device in slice
            .spec
            .devices
            .iter()
            .flatten()
            .filter(|d| has_items(&d.consumes_counters))
        {
            consumers_sent += 1;
            let kept = kept_devices.get(device.name.as_str());
            if !kept.is_some_and(|d| has_items(&d.consumes_counters)) {
                consumers_lost += 1;
            }
        }
    }
    (sets_lost + consumers_lost > 0).then(|| {
        format!(
            "the API server dropped sharedCounters from {sets_lost} of {sets_sent} ResourceSlices with counters \
             and consumesCounters from {consumers_lost} of {consumers_sent} devices"
        )
    })
}

/// Why sharing is considered unsupported, when a device we sent with `allowMultipleAllocations`
/// or a capacity we sent with a `requestPolicy` came back without it; `None` when everything
/// arrived. Slices missing from `stored` are not judged.
pub fn sharing_dropped(sent: &[ResourceSlice], stored: &[ResourceSlice]) -> Option<String> {
    let stored_slices: BTreeMap<&str, &ResourceSlice> = stored
        .iter()
        .filter_map(|slice| Some((slice.metadata.name.as_deref()?, slice)))
        .collect();
    let stored: BTreeMap<(&str, &str), &Device> = stored_slices
        .iter()
        .flat_map(|(name, slice)| {
            slice
                .spec
                .devices
                .iter()
                .flatten()
                .map(move |d| ((*name, d.name.as_str()), d))
        })
        .collect();
    let (mut shared_sent, mut shared_lost, mut policies_sent, mut policies_lost) = (0, 0, 0, 0);
    for slice in sent {
        let Some(name) = slice
            .metadata
            .name
            .as_deref()
            .filter(|name| stored_slices.contains_key(name))
        else {
            continue;
        };
        for device in slice.spec.devices.iter().flatten() {
            let kept = stored.get(&(name, device.name.as_str()));
            if device.allow_multiple_allocations == Some(true) {
                shared_sent += 1;
                if kept.is_none_or(|d| d.allow_multiple_allocations != Some(true)) {
                    shared_lost += 1;
                }
            }
            for (capacity, _) in device
                .capacity
                .iter()
                .flatten()
                .filter(|(_, c)| c.request_policy.is_some())
            {
                policies_sent += 1;
                let kept_policy = kept
                    .and_then(|d| d.capacity.as_ref())
                    .and_then(|c| c.get(capacity))
                    .is_some_and(|c| c.request_policy.is_some());
                if !kept_policy {
                    policies_lost += 1;
                }
            }
        }
    }
    (shared_lost + policies_lost > 0).then(|| {
        format!(
            "the API server dropped allowMultipleAllocations from {shared_lost} of {shared_sent} shared devices \
             and requestPolicy from {policies_lost} of {policies_sent} capacities"
        )
    })
}

fn has_items<T>(list: &Option<Vec<T>>) -> bool {
    list.as_ref().is_some_and(|items| !items.is_empty())
}

/// Why taints are considered unsupported, when a device we sent with taints came back without
/// them (a server whose `DRADeviceTaints` gate is off drops the field); `None` when they arrived.
/// Slices missing from `stored` are not judged.
pub fn taints_dropped(sent: &[ResourceSlice], stored: &[ResourceSlice]) -> Option<String> {
    let kept: BTreeMap<(&str, &str), &Device> = stored
        .iter()
        .filter_map(|slice| Some((slice.metadata.name.as_deref()?, slice)))
        .flat_map(|(name, slice)| {
            slice
                .spec
                .devices
                .iter()
                .flatten()
                .map(move |d| ((name, d.name.as_str()), d))
        })
        .collect();
    let (mut tainted_sent, mut tainted_lost) = (0, 0);
    for slice in sent {
        let Some(name) = slice.metadata.name.as_deref() else {
            continue;
        };
        for device in slice.spec.devices.iter().flatten().filter(|d| has_items(&d.taints)) {
            let Some(stored) = kept.get(&(name, device.name.as_str())) else {
                continue;
            };
            tainted_sent += 1;
            if !has_items(&stored.taints) {
                tainted_lost += 1;
            }
        }
    }
    (tainted_lost > 0)
        .then(|| format!("the API server dropped the taints of {tainted_lost} of {tainted_sent} tainted devices"))
}
