//! The API server's limits on a ResourceSlice (k8s.io/api `resource/v1/types.go` at 1.34 and
//! 1.35+), checked on every slice before it is sent: a slice the server would refuse must fail here,
//! with the slice and the limit named, not as a 422 on the node.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceSliceSpec;

use crate::layout::Layout;
use crate::names::is_dns_label;

/// Devices per slice (`ResourceSliceMaxDevices`).
pub const MAX_DEVICES: usize = 128;
/// 1.35+: devices per slice when any device consumes counters.
pub const MAX_DEVICES_WITH_COUNTERS: usize = 64;
/// Attributes and capacities together, per device.
pub const MAX_ATTRIBUTES_AND_CAPACITIES: usize = 32;
/// 1.34: shared counters of all counter sets of one slice together.
pub const MAX_SHARED_COUNTERS_1_34: usize = 32;
/// 1.34: consumed counters of all devices of one slice together.
pub const MAX_CONSUMED_COUNTERS_1_34: usize = 1024;
/// 1.35+: counter sets per slice.
pub const MAX_COUNTER_SETS: usize = 8;
/// Counters per counter set (1.35+), and per device consumption.
pub const MAX_COUNTERS_PER_SET: usize = 32;
/// 1.35+: consumesCounters entries per device.
pub const MAX_CONSUMPTIONS_PER_DEVICE: usize = 2;
/// Taints per device (`DeviceTaintsMaxLength`: 4 in 1.34, 16 from 1.37; the lower bound holds for both).
pub const MAX_TAINTS_PER_DEVICE: usize = 4;

/// Why `spec` would be refused under `layout`, or `Ok`.
pub fn check_slice(spec: &ResourceSliceSpec, layout: Layout) -> Result<(), String> {
    let devices = spec.devices.as_deref().unwrap_or_default();
    let sets = spec.shared_counters.as_deref().unwrap_or_default();
    let consumptions = || devices.iter().flat_map(|d| d.consumes_counters.iter().flatten());
    let uses_counters = consumptions().next().is_some();
    let uses_taints = devices.iter().any(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()));

    let max_devices = match layout {
        Layout::Split if uses_counters || uses_taints => MAX_DEVICES_WITH_COUNTERS,
        _ => MAX_DEVICES,
    };
    limit("devices", devices.len(), max_devices)?;
    if devices.is_empty() && sets.is_empty() {
        return Err("the slice has neither devices nor shared counters".into());
    }
    for device in devices {
        if !is_dns_label(&device.name) {
            return Err(format!("device name {:?} is not a DNS label", device.name));
        }
        let entries =
            device.attributes.as_ref().map_or(0, |a| a.len()) + device.capacity.as_ref().map_or(0, |c| c.len());
        limit(
            &format!("device {}: attributes and capacities", device.name),
            entries,
            MAX_ATTRIBUTES_AND_CAPACITIES,
        )?;
        let taints = device.taints.as_ref().map_or(0, Vec::len);
        limit(
            &format!("device {}: taints", device.name),
            taints,
            MAX_TAINTS_PER_DEVICE,
        )?;
        let device_consumptions = device.consumes_counters.as_deref().unwrap_or_default();
        if layout == Layout::Split {
            let what = format!("device {}: consumesCounters entries", device.name);
            limit(&what, device_consumptions.len(), MAX_CONSUMPTIONS_PER_DEVICE)?;
        }
        for consumption in device_consumptions {
            let what = format!(
                "device {}: counters consumed from {}",
                device.name, consumption.counter_set
            );
            limit(&what, consumption.counters.len(), MAX_COUNTERS_PER_SET)?;
        }
    }
    for set in sets {
        if !is_dns_label(&set.name) {
            return Err(format!("counter set name {:?} is not a DNS label", set.name));
        }
        if let Some(bad) = set.counters.keys().find(|name| !is_dns_label(name)) {
            return Err(format!(
                "counter {bad:?} of counter set {} is not a DNS label",
                set.name
            ));
        }
        limit(
            &format!("counters of counter set {}", set.name),
            set.counters.len(),
            MAX_COUNTERS_PER_SET,
        )?;
    }
    match layout {
        Layout::Combined => {
            let shared: usize = sets.iter().map(|s| s.counters.len()).sum();
            limit("shared counters", shared, MAX_SHARED_COUNTERS_1_34)?;
            let consumed: usize = consumptions().map(|c| c.counters.len()).sum();
            limit("consumed counters", consumed, MAX_CONSUMED_COUNTERS_1_34)?;
            let local: BTreeSet<&str> = sets.iter().map(|s| s.name.as_str()).collect();
            if let Some(foreign) = consumptions().find(|c| !local.contains(c.counter_set.as_str())) {
                return Err(format!(
                    "a device consumes counter set {} that is not in the same slice",
                    foreign.counter_set
                ));
            }
        }
        Layout::Split => {
            limit("counter sets", sets.len(), MAX_COUNTER_SETS)?;
            if !devices.is_empty() && !sets.is_empty() {
                return Err("devices and sharedCounters are in the same slice".into());
            }
        }
    }
    Ok(())
}

fn limit(what: &str, count: usize, max: usize) -> Result<(), String> {
    if count > max {
        return Err(format!("{what}: {count}, at most {max} allowed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Counter, CounterSet, Device, DeviceCounterConsumption};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn set(name: &str, counters: usize) -> CounterSet {
        let counter = Counter {
            value: Quantity("1".into()),
        };
        CounterSet {
            name: name.into(),
            counters: (0..counters).map(|i| (format!("c{i}"), counter.clone())).collect(),
        }
    }

    fn devices(count: usize, set: Option<&str>) -> Vec<Device> {
        (0..count)
            .map(|i| Device {
                name: format!("gpu{i}"),
                consumes_counters: set.map(|set| {
                    vec![DeviceCounterConsumption {
                        counter_set: set.into(),
                        counters: [(
                            "c0".to_owned(),
                            Counter {
                                value: Quantity("1".into()),
                            },
                        )]
                        .into(),
                    }]
                }),
                ..Device::default()
            })
            .collect()
    }

    fn spec(sets: Vec<CounterSet>, devices: Vec<Device>) -> ResourceSliceSpec {
        ResourceSliceSpec {
            shared_counters: (!sets.is_empty()).then_some(sets),
            devices: (!devices.is_empty()).then_some(devices),
            ..ResourceSliceSpec::default()
        }
    }

    #[test]
    fn the_1_34_layout_counts_shared_counters_across_sets() {
        let two_cards = spec(vec![set("a", 15), set("b", 15)], devices(2, Some("a")));
        assert_eq!(check_slice(&two_cards, Layout::Combined), Ok(()));
        let three_cards = spec(vec![set("a", 15), set("b", 15), set("c", 15)], devices(2, Some("a")));
        let error = check_slice(&three_cards, Layout::Combined).unwrap_err();
        assert!(error.contains("shared counters: 45, at most 32"), "{error}");
    }

    #[test]
    fn the_1_34_layout_needs_the_consumed_set_in_the_same_slice() {
        let error = check_slice(&spec(vec![set("a", 1)], devices(1, Some("b"))), Layout::Combined).unwrap_err();
        assert!(error.contains("counter set b"), "{error}");
    }

    #[test]
    fn the_1_35_layout_separates_counters_and_devices_and_caps_consuming_slices_at_64() {
        let mixed = spec(vec![set("a", 1)], devices(1, Some("a")));
        assert!(check_slice(&mixed, Layout::Split).is_err());
        assert!(check_slice(&spec(vec![], devices(64, Some("a"))), Layout::Split).is_ok());
        assert!(check_slice(&spec(vec![], devices(65, Some("a"))), Layout::Split).is_err());
        assert!(check_slice(&spec(vec![], devices(128, None)), Layout::Split).is_ok());
        let nine_sets = (0..9).map(|i| set(&format!("s{i}"), 1)).collect();
        assert!(check_slice(&spec(nine_sets, vec![]), Layout::Split).is_err());
    }
}
