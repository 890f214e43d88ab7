//! Did the API server keep our counters? A server whose `DRAPartitionableDevices` gate is off
//! accepts a ResourceSlice but silently drops `sharedCounters` and `consumesCounters`; MIG offers
//! would then overlap with nothing to keep them apart. Comparing what was sent with what was stored
//! is the only way to tell.

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

fn has_items<T>(list: &Option<Vec<T>>) -> bool {
    list.as_ref().is_some_and(|items| !items.is_empty())
}
