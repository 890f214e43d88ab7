//! The device index: ResourceSlices grouped into pools (latest generation only), every device
//! with its node binding, consumable capacities and resolved counter consumption. Counter sets
//! are found in both layouts: 1.34 keeps them in the device's own slice (keyed per slice),
//! 1.35+ in separate slices of the same pool (keyed per pool). A malformed pool (unknown counters,
//! bad quantities, no node selection) or an invalid one (a device name repeated across its slices,
//! the scheduler's `poolIsInvalid`) is left out whole and reported. Built once per `Allocator`;
//! claims only index into it, nothing is cloned per claim.

use std::collections::HashMap;

use dra_cel::Quantity;
use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, Device, DeviceTaint, ResourceSlice};

use crate::best_fit::FitKey;
use crate::node_selection::NodeBinding;

/// The gpu module's driver name: its devices are the ones the invariants speak about.
pub const GPU_DRIVER: &str = "gpu.deckhouse.io";

pub(crate) struct IndexedDevice {
    pub driver: String,
    pub pool: usize,
    pub name: String,
    pub device: Device,
    pub binding: NodeBinding,
    pub shared: bool,
    pub capacity: Vec<(String, Quantity, Option<CapacityRequestPolicy>)>,
    /// (counter set index, [(counter index, amount)]).
    pub consumes: Vec<(usize, Vec<(usize, Quantity)>)>,
    pub taints: Vec<DeviceTaint>,
    pub has_binding_conditions: bool,
    pub fit: FitKey,
    /// The counter set that stands for the physical card (`pgpu-<pci>`), for the invariants.
    pub card: Option<usize>,
}

pub(crate) struct CounterSet {
    pub name: String,
    pub counters: Vec<(String, Quantity)>,
}

pub(crate) struct Pool {
    pub driver: String,
    pub name: String,
    pub incomplete: bool,
    pub devices: Vec<usize>,
}

/// A slice that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredSlice {
    pub slice: String,
    pub driver: String,
    pub reason: String,
}

/// A pool left out whole (malformed or invalid), and why; its slices are in `IgnoredSlice`s too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredPool {
    pub driver: String,
    pub pool: String,
    pub reason: String,
}

#[derive(Default)]
pub(crate) struct Inventory {
    pub devices: Vec<IndexedDevice>,
    pub pools: Vec<Pool>,
    pub counter_sets: Vec<CounterSet>,
    pub by_id: HashMap<(String, String, String), usize>,
    pub ignored: Vec<IgnoredSlice>,
    pub ignored_pools: Vec<IgnoredPool>,
}

fn binding_of(slice: &ResourceSlice, device: &Device) -> Result<NodeBinding, String> {
    let spec = &slice.spec;
    let (name, all, selector) = if spec.per_device_node_selection == Some(true) {
        (&device.node_name, device.all_nodes, &device.node_selector)
    } else {
        (&spec.node_name, spec.all_nodes, &spec.node_selector)
    };
    match (name, all, selector) {
        (Some(n), None | Some(false), None) if !n.is_empty() => Ok(NodeBinding::Node(n.clone())),
        (None, Some(true), None) => Ok(NodeBinding::AllNodes),
        (None, None | Some(false), Some(s)) => Ok(NodeBinding::Selector(s.clone())),
        _ => Err("exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required".to_owned()),
    }
}

fn parse(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity, what: &str) -> Result<Quantity, String> {
    Quantity::parse(&q.0).map_err(|e| format!("{what}: {e}"))
}

impl Inventory {
    pub(crate) fn build(slices: &[ResourceSlice]) -> Inventory {
        let mut inventory = Inventory::default();
        // Latest generation per pool; older generations are ignored silently, as the scheduler does.
        let mut latest: HashMap<(&str, &str), i64> = HashMap::new();
        for slice in slices {
            let key = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
            let generation = latest.entry(key).or_insert(slice.spec.pool.generation);
            *generation = (*generation).max(slice.spec.pool.generation);
        }
        let mut grouped: Vec<((&str, &str), Vec<&ResourceSlice>)> = Vec::new();
        let mut group_index: HashMap<(&str, &str), usize> = HashMap::new();
        for slice in slices {
            let key = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
            if latest[&key] != slice.spec.pool.generation {
                continue;
            }
            let i = *group_index.entry(key).or_insert_with(|| {
                grouped.push((key, Vec::new()));
                grouped.len() - 1
            });
            grouped[i].1.push(slice);
        }
        // Deterministic pool order (the 1.36+ scheduler sorts pools too).
        grouped.sort_by(|a, b| a.0.cmp(&b.0));
        for ((driver, pool_name), mut pool_slices) in grouped {
            pool_slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            if let Err((slice, reason)) = inventory.add_pool(driver, pool_name, &pool_slices) {
                // The whole pool is unusable: counting every slice keeps the metric honest.
                for s in &pool_slices {
                    let name = s.metadata.name.clone().unwrap_or_default();
                    let why = if name == slice {
                        reason.clone()
                    } else {
                        format!("pool {pool_name} is left out because of slice {slice}: {reason}")
                    };
                    inventory.ignored.push(IgnoredSlice {
                        slice: name,
                        driver: driver.to_owned(),
                        reason: why,
                    });
                }
                inventory.ignored_pools.push(IgnoredPool {
                    driver: driver.to_owned(),
                    pool: pool_name.to_owned(),
                    reason: format!("slice {slice}: {reason}"),
                });
            }
        }
        inventory
    }

    fn add_pool(&mut self, driver: &str, pool_name: &str, slices: &[&ResourceSlice]) -> Result<(), (String, String)> {
        let expected = slices[0].spec.pool.resource_slice_count;
        let incomplete = slices.len() as i64 != expected;
        // Pool-wide counter sets (1.35+ layout) first, so devices in any slice can find them.
        let mut pool_sets: HashMap<&str, usize> = HashMap::new();
        let first_set = self.counter_sets.len();
        let mut staged_sets: Vec<CounterSet> = Vec::new();
        let mut slice_sets: Vec<HashMap<&str, usize>> = Vec::new();
        for slice in slices {
            let slice_name = slice.metadata.name.clone().unwrap_or_default();
            let mut own = HashMap::new();
            for set in slice.spec.shared_counters.iter().flatten() {
                let mut counters = Vec::new();
                for (name, counter) in &set.counters {
                    counters.push((
                        name.clone(),
                        parse(&counter.value, &format!("counter {}/{name}", set.name))
                            .map_err(|e| (slice_name.clone(), e))?,
                    ));
                }
                let index = first_set + staged_sets.len();
                staged_sets.push(CounterSet {
                    name: set.name.clone(),
                    counters,
                });
                own.insert(set.name.as_str(), index);
                // A set inside a slice that also has devices is the 1.34 layout: keyed per slice.
                if slice.spec.devices.as_ref().is_none_or(Vec::is_empty)
                    && pool_sets.insert(set.name.as_str(), index).is_some()
                {
                    return Err((
                        slice_name,
                        format!("counter set {} is defined twice in pool {pool_name}", set.name),
                    ));
                }
            }
            slice_sets.push(own);
        }
        let pool_index = self.pools.len();
        let mut staged_devices = Vec::new();
        // A pool repeating a device name across its slices is invalid (`poolIsInvalid`): never used.
        let mut first_slice_of: HashMap<&str, &str> = HashMap::new();
        for (slice, own_sets) in slices.iter().zip(&slice_sets) {
            let slice_name = slice.metadata.name.as_deref().unwrap_or_default();
            for device in slice.spec.devices.iter().flatten() {
                if let Some(first) = first_slice_of.insert(device.name.as_str(), slice_name) {
                    return Err((
                        slice_name.to_owned(),
                        format!(
                            "invalid pool: device {} is listed in slices {first} and {slice_name}, but device names must be unique within a pool",
                            device.name
                        ),
                    ));
                }
                let indexed = self
                    .index_device(
                        driver,
                        pool_index,
                        slice,
                        device,
                        own_sets,
                        &pool_sets,
                        first_set,
                        &staged_sets,
                    )
                    .map_err(|e| (slice_name.to_owned(), format!("device {}: {e}", device.name)))?;
                staged_devices.push(indexed);
            }
        }
        self.counter_sets.extend(staged_sets);
        let mut pool = Pool {
            driver: driver.to_owned(),
            name: pool_name.to_owned(),
            incomplete,
            devices: Vec::new(),
        };
        for device in staged_devices {
            let index = self.devices.len();
            self.by_id.insert(
                (device.driver.clone(), pool_name.to_owned(), device.name.clone()),
                index,
            );
            pool.devices.push(index);
            self.devices.push(device);
        }
        self.pools.push(pool);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn index_device(
        &self,
        driver: &str,
        pool: usize,
        slice: &ResourceSlice,
        device: &Device,
        own_sets: &HashMap<&str, usize>,
        pool_sets: &HashMap<&str, usize>,
        first_set: usize,
        staged_sets: &[CounterSet],
    ) -> Result<IndexedDevice, String> {
        let binding = binding_of(slice, device)?;
        let mut capacity = Vec::new();
        for (name, cap) in device.capacity.iter().flatten() {
            capacity.push((
                name.clone(),
                parse(&cap.value, &format!("capacity {name}"))?,
                cap.request_policy.clone(),
            ));
        }
        let mut consumes = Vec::new();
        let mut card = None;
        for consumption in device.consumes_counters.iter().flatten() {
            let set_index = *own_sets
                .get(consumption.counter_set.as_str())
                .or_else(|| pool_sets.get(consumption.counter_set.as_str()))
                .ok_or_else(|| format!("consumes counters of unknown counter set {}", consumption.counter_set))?;
            let set = &staged_sets[set_index - first_set];
            let mut amounts = Vec::new();
            for (name, counter) in &consumption.counters {
                let position = set
                    .counters
                    .iter()
                    .position(|(n, _)| n == name)
                    .ok_or_else(|| format!("consumes unknown counter {name} of counter set {}", set.name))?;
                amounts.push((position, parse(&counter.value, &format!("counter {name}"))?));
            }
            if set.name.starts_with("pgpu-") {
                card = Some(set_index);
            }
            consumes.push((set_index, amounts));
        }
        let fit = FitKey::of(device, &consumes, staged_sets, first_set);
        Ok(IndexedDevice {
            driver: driver.to_owned(),
            pool,
            name: device.name.clone(),
            device: device.clone(),
            binding,
            shared: device.allow_multiple_allocations == Some(true),
            capacity,
            consumes,
            taints: device.taints.clone().unwrap_or_default(),
            has_binding_conditions: device.binding_conditions.as_ref().is_some_and(|c| !c.is_empty()),
            fit,
            card: if driver == GPU_DRIVER { card } else { None },
        })
    }

    pub(crate) fn device_index(&self, driver: &str, pool: &str, device: &str) -> Option<usize> {
        self.by_id
            .get(&(driver.to_owned(), pool.to_owned(), device.to_owned()))
            .copied()
    }
}
