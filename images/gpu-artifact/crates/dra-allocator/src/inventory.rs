//! The device index, kept up to date slice by slice: slices grouped into pools (see `pool`),
//! devices and counter sets in slots that stay put while their slice does, and which pools each
//! node reaches (see `reach`). A change to one slice re-checks only its pool; devices of the other
//! slices keep their slots, and with them what was learnt about them (selector results).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceSlice;

use crate::device::RawDevice;
use crate::node_selection::NodeBinding;
use crate::pool::{Pool, Positions, SetUses};
use crate::slice_record::{CounterList, Tables, parse_slice};

/// The gpu module's driver name: its devices are the ones the invariants speak about.
pub const GPU_DRIVER: &str = "gpu.deckhouse.io";

pub(crate) struct Device {
    pub raw: RawDevice,
    pub pool: u32,
    /// In the newest generation of a usable pool.
    pub live: bool,
    /// (counter set slot, counter positions and amounts).
    pub consumes: SetUses,
    /// The counter set standing for the physical card (`pgpu-<pci>`), for the invariants.
    pub card: Option<u32>,
}

pub(crate) struct CounterSet {
    pub name: Arc<str>,
    pub counters: Arc<CounterList>,
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

pub(crate) type PoolKey = (Arc<str>, Arc<str>);

#[derive(Default)]
pub(crate) struct Inventory {
    pub devices: Vec<Option<Device>>,
    free_devices: Vec<u32>,
    pub counter_sets: Vec<Option<CounterSet>>,
    free_sets: Vec<u32>,
    pub pools: Vec<Option<Pool>>,
    free_pools: Vec<u32>,
    pub pool_ids: BTreeMap<PoolKey, u32>,
    slice_pool: HashMap<Arc<str>, u32>,
    pub tables: Tables,
    positions: crate::intern::Dedup<Positions>,
    /// Device slots whose device was replaced or removed since the caller last took them.
    pub changed_slots: Vec<u32>,
    changes_since_prune: usize,
    /// The admin DeviceTaintRules, and which of them select each device slot (`taint_rule_hits`).
    pub taint_rules: Vec<crate::taint_rule_hits::AppliedRule>,
    pub rule_hits: HashMap<u32, crate::taint_rules::RuleHits>,
}

/// Slice changes between two prunings of the shared copies (at least; more for big inventories).
const PRUNE_EVERY: usize = 256;

impl Inventory {
    pub(crate) fn device(&self, slot: u32) -> &Device {
        self.devices[slot as usize].as_ref().expect("a live slot")
    }

    pub(crate) fn pool(&self, id: u32) -> &Pool {
        self.pools[id as usize].as_ref().expect("a live pool")
    }

    pub(crate) fn driver_of(&self, slot: u32) -> &str {
        &self.pool(self.device(slot).pool).driver
    }

    /// The node selection of a device.
    pub(crate) fn binding_of(&self, slot: u32) -> Option<&NodeBinding> {
        Some(self.device(slot).raw.binding())
    }

    /// The pool a slice of this name belongs to now, if any.
    pub(crate) fn pool_of_slice(&self, name: &str) -> Option<u32> {
        self.slice_pool.get(name).copied()
    }

    /// The id of pool (`driver`, `pool`). A pool's driver and name stay in the string table while
    /// it exists, so a name not there names no pool, and the key is made of the shared copies
    /// without allocating.
    pub(crate) fn pool_id(&self, driver: &str, pool: &str) -> Option<u32> {
        let strings = &self.tables.strings;
        let key = (Arc::clone(strings.find(driver)?), Arc::clone(strings.find(pool)?));
        self.pool_ids.get(&key).copied()
    }

    /// Adds or replaces `slices` (by name), re-checking each pool they touch once. Returns the
    /// pools whose contents changed (for the caller's bookkeeping: usage taken back before,
    /// retaken after).
    pub(crate) fn apply_slices(&mut self, slices: &[&ResourceSlice]) -> Vec<u32> {
        let mut touched = std::collections::BTreeSet::new();
        for slice in slices {
            let name = slice.metadata.name.as_deref().unwrap_or_default();
            if let Some(old) = self.take_slice(name) {
                touched.insert(old);
            }
            touched.insert(self.insert_slice(slice));
        }
        for &id in &touched {
            self.rebuild(id);
        }
        touched.into_iter().collect()
    }

    /// Removes the slice named `name`, if known. Returns the pool it changed.
    pub(crate) fn remove_slice(&mut self, name: &str) -> Vec<u32> {
        let Some(pool_id) = self.take_slice(name) else {
            return Vec::new();
        };
        self.rebuild(pool_id);
        vec![pool_id]
    }

    /// Takes the slice out of its pool (not re-checked yet), freeing its devices' slots.
    fn take_slice(&mut self, name: &str) -> Option<u32> {
        let pool_id = self.slice_pool.remove(name)?;
        let pool = self.pools[pool_id as usize].as_mut().expect("a live pool");
        let at = pool
            .slices
            .iter()
            .position(|s| &*s.name == name)
            .expect("indexed slice");
        let record = pool.slices.remove(at);
        for slot in record.devices {
            self.devices[slot as usize] = None;
            self.free_devices.push(slot);
            self.changed_slots.push(slot);
        }
        Some(pool_id)
    }

    /// Puts the slice into its pool (made if new), not re-checked yet.
    fn insert_slice(&mut self, slice: &ResourceSlice) -> u32 {
        let key = (
            self.tables.strings.str(&slice.spec.driver),
            self.tables.strings.str(&slice.spec.pool.name),
        );
        let pool_id = match self.pool_ids.get(&key) {
            Some(id) => *id,
            None => {
                let pool = Pool::new(key.0.clone(), key.1.clone());
                let id = match self.free_pools.pop() {
                    Some(id) => {
                        self.pools[id as usize] = Some(pool);
                        id
                    }
                    None => {
                        self.pools.push(Some(pool));
                        (self.pools.len() - 1) as u32
                    }
                };
                self.pool_ids.insert(key, id);
                id
            }
        };
        let (mut record, raws) = parse_slice(slice, &mut self.tables);
        for raw in raws {
            let slot = self.place(Device {
                raw,
                pool: pool_id,
                live: false,
                consumes: SetUses::None,
                card: None,
            });
            record.devices.push(slot);
        }
        self.slice_pool.insert(record.name.clone(), pool_id);
        let pool = self.pools[pool_id as usize].as_mut().expect("just made");
        let at = pool.slices.partition_point(|s| s.name < record.name);
        pool.slices.insert(at, record);
        pool_id
    }

    /// Forgets pools without slices and, now and then, shared copies no one uses (after the
    /// caller has taken back everything it held in them).
    pub(crate) fn collect(&mut self, pools: &[u32]) {
        for &id in pools {
            let empty = self.pools[id as usize].as_ref().is_some_and(|p| p.slices.is_empty());
            if empty {
                let pool = self.pools[id as usize].take().expect("checked");
                self.pool_ids.remove(&(pool.driver, pool.name));
                self.free_pools.push(id);
            }
        }
        // Pruning walks every shared copy: do it once per many changes, so its cost per change
        // stays small while what it may hold back stays bounded.
        self.changes_since_prune += 1;
        if self.changes_since_prune >= PRUNE_EVERY.max(self.pool_ids.len() / 4) {
            self.changes_since_prune = 0;
            self.tables.prune();
            self.positions.prune();
        }
    }

    fn place(&mut self, device: Device) -> u32 {
        let slot = match self.free_devices.pop() {
            Some(slot) => {
                self.devices[slot as usize] = Some(device);
                slot
            }
            None => {
                if self.devices.len() == self.devices.capacity() {
                    // An eighth more, not double: device slots are most of the engine's memory,
                    // and a doubled vector could leave half of them empty for good.
                    self.devices.reserve_exact((self.devices.len() / 8).max(1024));
                }
                self.devices.push(Some(device));
                (self.devices.len() - 1) as u32
            }
        };
        self.changed_slots.push(slot);
        slot
    }

    /// Re-checks one pool and resolves its devices' counter consumption.
    fn rebuild(&mut self, pool_id: u32) {
        let old_sets = std::mem::take(&mut self.pools[pool_id as usize].as_mut().expect("pool").sets);
        for slot in old_sets {
            self.counter_sets[slot as usize] = None;
            self.free_sets.push(slot);
        }
        let pool = self.pools[pool_id as usize].as_ref().expect("pool");
        let devices = &self.devices;
        let plan = pool
            .plan(&|slot| &devices[slot as usize].as_ref().expect("slot").raw)
            .map(|plan| {
                let sets: Vec<(Arc<str>, Arc<CounterList>)> =
                    plan.sets.iter().map(|s| (s.name.clone(), s.counters.clone())).collect();
                (sets, plan.devices, plan.incomplete)
            });
        let all_slots: Vec<u32> = pool.slices.iter().flat_map(|s| s.devices.iter().copied()).collect();
        for &slot in &all_slots {
            let device = self.devices[slot as usize].as_mut().expect("slot");
            device.live = false;
            device.consumes = SetUses::None;
            device.card = None;
        }
        let (sets, planned, incomplete) = match plan {
            Ok(plan) => plan,
            Err(problem) => {
                let pool = self.pools[pool_id as usize].as_mut().expect("pool");
                pool.live = false;
                pool.incomplete = false;
                pool.by_name.clear();
                pool.problem = Some(problem);
                return;
            }
        };
        let mut set_slots = Vec::with_capacity(sets.len());
        for (name, counters) in sets {
            let set = CounterSet { name, counters };
            let slot = match self.free_sets.pop() {
                Some(slot) => {
                    self.counter_sets[slot as usize] = Some(set);
                    slot
                }
                None => {
                    self.counter_sets.push(Some(set));
                    (self.counter_sets.len() - 1) as u32
                }
            };
            set_slots.push(slot);
        }
        let ours = &*self.pool(pool_id).driver == GPU_DRIVER;
        let mut by_name = Vec::with_capacity(planned.len());
        for (slot, consumes) in planned {
            let mut resolved = Vec::with_capacity(consumes.len());
            let mut card = None;
            for (set, positions) in consumes {
                let set_slot = set_slots[set];
                let set_name = &self.counter_sets[set_slot as usize].as_ref().expect("set").name;
                if ours && set_name.starts_with("pgpu-") {
                    card = Some(set_slot);
                }
                resolved.push((set_slot, self.positions.value(Positions(positions))));
            }
            let device = self.devices[slot as usize].as_mut().expect("slot");
            device.live = true;
            device.consumes = resolved.into();
            device.card = card;
            by_name.push(slot);
        }
        let devices = &self.devices;
        by_name.sort_by(|a, b| {
            let name = |s: &u32| devices[*s as usize].as_ref().expect("slot").raw.name();
            name(a).cmp(name(b))
        });
        let pool = self.pools[pool_id as usize].as_mut().expect("pool");
        pool.live = true;
        pool.incomplete = incomplete;
        pool.sets = set_slots;
        pool.by_name = by_name;
        pool.problem = None;
    }

    /// The live device `name` of pool (`driver`, `pool`).
    pub(crate) fn device_index(&self, driver: &str, pool: &str, name: &str) -> Option<u32> {
        let pool = self.pool(self.pool_id(driver, pool)?);
        let at = pool
            .by_name
            .binary_search_by(|slot| (**self.device(*slot).raw.name()).cmp(name))
            .ok()?;
        Some(pool.by_name[at])
    }

    /// Live devices of every pool, in pool then name order.
    pub(crate) fn live_devices(&self) -> impl Iterator<Item = u32> + '_ {
        self.pool_ids
            .values()
            .flat_map(move |id| self.pool(*id).by_name.iter().copied())
    }

    pub(crate) fn ignored_slices(&self) -> Vec<IgnoredSlice> {
        let mut ignored = Vec::new();
        for id in self.pool_ids.values() {
            let pool = self.pool(*id);
            let Some((slice, reason)) = &pool.problem else { continue };
            let latest = pool.slices.iter().map(|s| s.generation).max().unwrap_or_default();
            // The whole pool is unusable: counting every slice keeps the metric honest.
            for s in pool.slices.iter().filter(|s| s.generation == latest) {
                let why = if s.name == *slice {
                    reason.clone()
                } else {
                    format!("pool {} is left out because of slice {slice}: {reason}", pool.name)
                };
                ignored.push(IgnoredSlice {
                    slice: s.name.to_string(),
                    driver: pool.driver.to_string(),
                    reason: why,
                });
            }
        }
        ignored
    }

    pub(crate) fn ignored_pools(&self) -> Vec<IgnoredPool> {
        self.pool_ids
            .values()
            .filter_map(|id| {
                let pool = self.pool(*id);
                pool.problem.as_ref().map(|(slice, reason)| IgnoredPool {
                    driver: pool.driver.to_string(),
                    pool: pool.name.to_string(),
                    reason: format!("slice {slice}: {reason}"),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    /// One slot is kept for every device of the cluster (208,000 at 1,000 nodes x 8 H100 with
    /// every MIG offer): two shared pointers, what it consumes, its pool, card and liveness.
    #[test]
    fn a_device_slot_takes_six_words() {
        assert_eq!(std::mem::size_of::<Option<super::Device>>(), 48);
    }
}
