//! One resource pool, checked and resolved from its slices whenever one of them changes: only the
//! newest generation counts; a pool with fewer or more slices than it announces is incomplete; a
//! pool is left out whole when a counter set is malformed or defined twice (1.35+ layout), a device
//! name repeats across its slices (the scheduler's `poolIsInvalid`), or a device consumes a counter
//! set or counter that does not exist. Counter sets are found in both layouts: 1.34 keeps them in
//! the device's own slice, 1.35+ in separate slices of the same pool.

use std::collections::HashMap;
use std::sync::Arc;

use dra_cel::Quantity;

use crate::device::RawDevice;
use crate::slice_record::{CounterList, SliceRecord};

/// A counter consumption resolved to positions in the counter set's list.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Positions(pub Box<[(u16, Quantity)]>);

/// What a live device consumes: (counter set slot, positions and amounts) for each set. Nearly
/// every device consumes one set (its card's), held inline: one slot of the cluster's devices
/// then needs no allocation of its own for it. 16 bytes: the rare list behind a thin pointer.
pub(crate) enum SetUses {
    None,
    One(u32, Arc<Positions>),
    /// Boxed so the pointer is thin: a `Vec` or a boxed slice would make every slot 8 bytes wider.
    #[allow(clippy::box_collection)]
    Many(Box<Vec<(u32, Arc<Positions>)>>),
}

impl SetUses {
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Arc<Positions>)> {
        let (one, many) = match self {
            SetUses::None => (None, &[][..]),
            SetUses::One(set, positions) => (Some((*set, positions)), &[][..]),
            SetUses::Many(many) => (None, &many[..]),
        };
        one.into_iter()
            .chain(many.iter().map(|(set, positions)| (*set, positions)))
    }
}

impl From<Vec<(u32, Arc<Positions>)>> for SetUses {
    fn from(mut uses: Vec<(u32, Arc<Positions>)>) -> SetUses {
        match uses.len() {
            0 => SetUses::None,
            1 => {
                let (set, positions) = uses.remove(0);
                SetUses::One(set, positions)
            }
            _ => SetUses::Many(Box::new(uses)),
        }
    }
}

pub(crate) struct Pool {
    pub driver: Arc<str>,
    pub name: Arc<str>,
    /// Every slice of the pool, any generation, in name order.
    pub slices: Vec<SliceRecord>,
    pub live: bool,
    pub incomplete: bool,
    /// Counter set slots of the live generation.
    pub sets: Vec<u32>,
    /// Live device slots in device-name order.
    pub by_name: Vec<u32>,
    /// Why the pool is left out: (slice, reason).
    pub problem: Option<(Arc<str>, String)>,
}

/// A counter set of the live generation.
pub(crate) struct SetPlan<'p> {
    pub name: &'p Arc<str>,
    pub counters: &'p Arc<CounterList>,
}

/// What a pool check found: whether it is incomplete, its counter sets, and per live device
/// the sets it consumes (indices into `sets`) with counter positions.
pub(crate) struct PoolPlan<'p> {
    pub incomplete: bool,
    pub sets: Vec<SetPlan<'p>>,
    /// (slot, [(set index, positions)]).
    pub devices: Vec<(u32, Vec<SetConsumption>)>,
}

/// What a device consumes of one counter set: the set's index in the plan, and (counter
/// position, amount) pairs.
pub(crate) type SetConsumption = (usize, Box<[(u16, Quantity)]>);

impl Pool {
    pub(crate) fn new(driver: Arc<str>, name: Arc<str>) -> Pool {
        Pool {
            driver,
            name,
            slices: Vec::new(),
            live: false,
            incomplete: false,
            sets: Vec::new(),
            by_name: Vec::new(),
            problem: None,
        }
    }

    /// Checks the newest generation of the pool and plans its counter sets and consumptions, or
    /// says which slice makes it unusable and why.
    pub(crate) fn plan<'p>(
        &'p self,
        device: &dyn Fn(u32) -> &'p RawDevice,
    ) -> Result<PoolPlan<'p>, (Arc<str>, String)> {
        let latest = self.slices.iter().map(|s| s.generation).max().unwrap_or_default();
        let live_slices: Vec<usize> = (0..self.slices.len())
            .filter(|i| self.slices[*i].generation == latest)
            .collect();
        let Some(&first) = live_slices.first() else {
            return Ok(PoolPlan {
                incomplete: false,
                sets: Vec::new(),
                devices: Vec::new(),
            });
        };
        let incomplete = live_slices.len() as i64 != self.slices[first].count;
        let mut sets: Vec<SetPlan<'p>> = Vec::new();
        let mut pool_sets: HashMap<&str, usize> = HashMap::new();
        let mut own_sets: HashMap<usize, HashMap<&str, usize>> = HashMap::new();
        for &s in &live_slices {
            let slice = &self.slices[s];
            if let Some(error) = &slice.set_error {
                return Err((slice.name.clone(), error.clone()));
            }
            let own = own_sets.entry(s).or_default();
            for set in &slice.counter_sets {
                let index = sets.len();
                sets.push(SetPlan {
                    name: &set.name,
                    counters: &set.counters,
                });
                own.insert(&set.name, index);
                // A set inside a slice that also has devices is the 1.34 layout: its slice's own.
                if !slice.has_devices && pool_sets.insert(&set.name, index).is_some() {
                    return Err((
                        slice.name.clone(),
                        format!("counter set {} is defined twice in pool {}", set.name, self.name),
                    ));
                }
            }
        }
        let mut devices = Vec::new();
        let mut first_slice_of: HashMap<&str, &str> = HashMap::new();
        for &s in &live_slices {
            let slice = &self.slices[s];
            let error_at = slice.device_error.as_ref().map(|(p, _)| *p);
            for (position, &slot) in slice.devices.iter().enumerate() {
                if error_at == Some(position) {
                    break;
                }
                let raw = device(slot);
                if let Some(first) = first_slice_of.insert(raw.name(), &slice.name) {
                    return Err((
                        slice.name.clone(),
                        format!(
                            "invalid pool: device {} is listed in slices {first} and {}, but device names must be unique within a pool",
                            raw.name(),
                            slice.name
                        ),
                    ));
                }
                let mut consumes = Vec::new();
                for (set_name, amounts) in raw.kind.consumes.0.iter() {
                    let index = own_sets[&s]
                        .get(&**set_name)
                        .or_else(|| pool_sets.get(&**set_name))
                        .copied()
                        .ok_or_else(|| {
                            (
                                slice.name.clone(),
                                format!(
                                    "device {}: consumes counters of unknown counter set {set_name}",
                                    raw.name()
                                ),
                            )
                        })?;
                    let counters = &sets[index].counters.0;
                    let mut positions = Vec::with_capacity(amounts.0.len());
                    for (counter, amount) in amounts.0.iter() {
                        let position = counters.iter().position(|(n, _)| n == counter).ok_or_else(|| {
                            (
                                slice.name.clone(),
                                format!(
                                    "device {}: consumes unknown counter {counter} of counter set {set_name}",
                                    raw.name()
                                ),
                            )
                        })?;
                        positions.push((position as u16, *amount));
                    }
                    consumes.push((index, positions.into()));
                }
                devices.push((slot, consumes));
            }
            if let Some((_, error)) = &slice.device_error {
                return Err((slice.name.clone(), error.clone()));
            }
        }
        Ok(PoolPlan {
            incomplete,
            sets,
            devices,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses(sets: &[u32]) -> Vec<(u32, Arc<Positions>)> {
        let positions = Arc::new(Positions(Box::new([(0, Quantity::ZERO)])));
        sets.iter().map(|s| (*s, positions.clone())).collect()
    }

    fn sets_of(uses: &SetUses) -> Vec<u32> {
        uses.iter().map(|(set, _)| set).collect()
    }

    #[test]
    fn set_uses_keep_every_set_in_order_and_one_inline() {
        let one = SetUses::from(uses(&[7]));
        assert!(matches!(one, SetUses::One(7, _)));
        assert_eq!(sets_of(&one), [7]);
        let many = SetUses::from(uses(&[3, 1, 2]));
        assert!(matches!(many, SetUses::Many(_)));
        assert_eq!(sets_of(&many), [3, 1, 2]);
        let none = SetUses::from(uses(&[]));
        assert!(matches!(none, SetUses::None));
        assert_eq!(sets_of(&none), Vec::<u32>::new());
    }

    /// A device slot is kept for every device of the cluster: what it consumes stays two words.
    #[test]
    fn set_uses_take_two_words() {
        assert_eq!(std::mem::size_of::<SetUses>(), 16);
    }
}
