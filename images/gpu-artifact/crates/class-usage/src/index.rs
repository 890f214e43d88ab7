//! The published devices and what holds them, built once from the slices and claims so every class
//! is counted against one picture. Pools count at their newest generation and only when complete
//! (what the scheduler allocates from). Counter sets are keyed by (driver, pool, set name): our
//! publisher names a card's set after its PCI address, unique in the pool, in the 1.34 layout
//! (sets beside their devices) and the 1.35+ one (sets in slices of their own) alike.

use std::collections::{BTreeMap, HashMap};

use dra_cel::Quantity;
use k8s_openapi::api::resource::v1::{Device, ResourceClaim, ResourceSlice};

/// (driver, pool, device).
pub(crate) type DeviceKey = (String, String, String);
/// (driver, pool, counter set, counter).
type CounterKey = (String, String, String, String);

pub(crate) struct PublishedDevice {
    pub key: DeviceKey,
    pub device: Device,
    /// (counter key, amount) of every counter the device consumes.
    pub consumes: Vec<(CounterKey, Quantity)>,
}

/// What the claims hold of one device.
#[derive(Default)]
pub(crate) struct Holding {
    /// A result without a share id: the device is the claim's alone.
    pub exclusive: bool,
    /// Capacity consumed by the shares, by qualified capacity name.
    pub consumed: BTreeMap<String, Quantity>,
}

/// The cluster's published devices, counter sets and allocations.
pub struct DeviceUsageIndex {
    pub(crate) devices: Vec<PublishedDevice>,
    pub(crate) holdings: HashMap<DeviceKey, Holding>,
    /// Counter values of every published set, minus what allocated devices consume.
    pub(crate) available: HashMap<CounterKey, Quantity>,
    /// Device keys of each class's allocation results, by class name.
    pub(crate) allocated_by_class: HashMap<String, Vec<DeviceKey>>,
}

impl DeviceUsageIndex {
    pub fn build<'a>(
        slices: impl IntoIterator<Item = &'a ResourceSlice>,
        claims: impl IntoIterator<Item = &'a ResourceClaim>,
    ) -> DeviceUsageIndex {
        let current = current_slices(slices);
        let mut available: HashMap<CounterKey, Quantity> = HashMap::new();
        let mut devices = Vec::new();
        for slice in &current {
            let (driver, pool) = (&slice.spec.driver, &slice.spec.pool.name);
            for set in slice.spec.shared_counters.iter().flatten() {
                for (counter, value) in &set.counters {
                    let Ok(value) = Quantity::parse(&value.value.0) else {
                        continue;
                    };
                    available.insert((driver.clone(), pool.clone(), set.name.clone(), counter.clone()), value);
                }
            }
            for device in slice.spec.devices.iter().flatten() {
                let consumes = device
                    .consumes_counters
                    .iter()
                    .flatten()
                    .flat_map(|entry| {
                        entry.counters.iter().filter_map(|(counter, amount)| {
                            let amount = Quantity::parse(&amount.value.0).ok()?;
                            let key = (driver.clone(), pool.clone(), entry.counter_set.clone(), counter.clone());
                            Some((key, amount))
                        })
                    })
                    .collect();
                devices.push(PublishedDevice {
                    key: (driver.clone(), pool.clone(), device.name.clone()),
                    device: device.clone(),
                    consumes,
                });
            }
        }
        let mut holdings: HashMap<DeviceKey, Holding> = HashMap::new();
        let mut allocated_by_class: HashMap<String, Vec<DeviceKey>> = HashMap::new();
        for claim in claims {
            let Some(results) = claim
                .status
                .as_ref()
                .and_then(|s| s.allocation.as_ref())
                .and_then(|a| a.devices.as_ref())
                .and_then(|d| d.results.as_ref())
            else {
                continue;
            };
            for result in results {
                // The scheduler does not count admin access as allocated.
                if result.admin_access == Some(true) {
                    continue;
                }
                let key = (result.driver.clone(), result.pool.clone(), result.device.clone());
                let holding = holdings.entry(key.clone()).or_default();
                match &result.share_id {
                    None => holding.exclusive = true,
                    Some(_) => {
                        for (name, amount) in result.consumed_capacity.iter().flatten() {
                            let Ok(amount) = Quantity::parse(&amount.0) else {
                                continue;
                            };
                            let name = qualified(name, &result.driver);
                            let sum = holding.consumed.entry(name).or_insert(Quantity::ZERO);
                            *sum = sum.saturating_add(amount);
                        }
                    }
                }
                if let Some(class) = request_class(claim, &result.request) {
                    let keys = allocated_by_class.entry(class).or_default();
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
            }
        }
        // A held device takes its counters once, however many shares it has.
        for device in devices.iter().filter(|d| holdings.contains_key(&d.key)) {
            for (counter, amount) in &device.consumes {
                if let Some(left) = available.get_mut(counter) {
                    *left = left.saturating_sub(*amount);
                }
            }
        }
        DeviceUsageIndex {
            devices,
            holdings,
            available,
            allocated_by_class,
        }
    }
}

/// The slices of every complete pool at its newest generation.
fn current_slices<'a>(slices: impl IntoIterator<Item = &'a ResourceSlice>) -> Vec<&'a ResourceSlice> {
    let mut pools: BTreeMap<(&str, &str), Vec<&ResourceSlice>> = BTreeMap::new();
    for slice in slices {
        pools
            .entry((&slice.spec.driver, &slice.spec.pool.name))
            .or_default()
            .push(slice);
    }
    let mut current = Vec::new();
    for slices in pools.into_values() {
        let newest = slices.iter().map(|s| s.spec.pool.generation).max().unwrap_or_default();
        let of_newest: Vec<_> = slices
            .into_iter()
            .filter(|s| s.spec.pool.generation == newest)
            .collect();
        let expected = of_newest.first().map(|s| s.spec.pool.resource_slice_count);
        if expected == Some(of_newest.len() as i64) {
            current.extend(of_newest);
        }
    }
    current
}

/// The class a result's request (`<req>` or `<req>/<sub>`) named.
fn request_class(claim: &ResourceClaim, request: &str) -> Option<String> {
    let (main, sub) = match request.split_once('/') {
        Some((main, sub)) => (main, Some(sub)),
        None => (request, None),
    };
    let request = claim
        .spec
        .devices
        .as_ref()?
        .requests
        .as_ref()?
        .iter()
        .find(|r| r.name == main)?;
    match sub {
        None => request.exactly.as_ref().map(|e| e.device_class_name.clone()),
        Some(sub) => request
            .first_available
            .as_ref()?
            .iter()
            .find(|s| s.name == sub)
            .map(|s| s.device_class_name.clone()),
    }
}

/// A capacity or attribute name with its domain: names without one are in the driver's.
pub(crate) fn qualified(name: &str, driver: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("{driver}/{name}")
    }
}
