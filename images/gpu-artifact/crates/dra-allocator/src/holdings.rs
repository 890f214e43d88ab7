//! What each allocated claim holds, by device name, so usage can follow the claims: a claim that
//! goes gives back exactly what it took, and when a pool is rebuilt (one of its slices changed)
//! what its claims hold there is given back before and taken again after, against the devices
//! as they are now. A result naming a device not (yet) published is kept and counted once its
//! slice arrives. Results with admin access take nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use dra_cel::Quantity;
use k8s_openapi::api::resource::v1::AllocationResult;

use crate::inventory::{Inventory, PoolKey};
use crate::reach::Reach;
use crate::usage::{Take, Usage};

pub(crate) struct Holding {
    pub pool: PoolKey,
    pub device: Arc<str>,
    /// The consumed capacity of a share (by capacity name); `None` for an exclusive device.
    pub share: Option<BTreeMap<String, Quantity>>,
    /// The slot taken, and what a share consumed in the device's capacity order.
    pub taken: Option<(u32, Option<Vec<Quantity>>)>,
}

pub(crate) struct Held {
    /// `namespace/name`, for reports.
    pub name: String,
    /// Exactly as many as the claim's results (a `Vec` grown by pushes keeps room for four).
    pub holdings: Box<[Holding]>,
}

/// Claims by id, and the ids of the claims holding something in each pool: one shared copy of
/// each id.
#[derive(Default)]
pub(crate) struct Holdings {
    pub claims: HashMap<Arc<str>, Held>,
    by_pool: HashMap<PoolKey, BTreeSet<Arc<str>>>,
}

impl Holding {
    fn take(&self) -> Take {
        if self.share.is_some() {
            Take::Share
        } else {
            Take::Exclusive
        }
    }
}

/// Takes what `holding` names, if its device is live now.
fn take_one(holding: &mut Holding, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
    let Some(slot) = inventory.device_index(&holding.pool.0, &holding.pool.1, &holding.device) else {
        return;
    };
    let consumed = holding.share.as_ref().map(|by_name| {
        inventory
            .device(slot)
            .raw
            .kind
            .capacity
            .0
            .iter()
            .map(|(name, _, _)| by_name.get(&**name).copied().unwrap_or_default())
            .collect::<Vec<_>>()
    });
    usage.take(inventory, slot, holding.take(), consumed.as_deref());
    reach.touch(inventory, slot);
    holding.taken = Some((slot, consumed));
}

fn release_one(holding: &mut Holding, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
    if let Some((slot, consumed)) = holding.taken.take() {
        usage.release(inventory, slot, holding.take(), consumed.as_deref());
        reach.touch(inventory, slot);
    }
}

impl Holdings {
    /// Records what `allocation` gives claim `id` (replacing what it held before).
    pub(crate) fn set(
        &mut self,
        id: &str,
        name: &str,
        allocation: Option<&AllocationResult>,
        inventory: &mut Inventory,
        usage: &mut Usage,
        reach: &mut Reach,
    ) {
        self.remove(id, inventory, usage, reach);
        let Some(allocation) = allocation else { return };
        let id: Arc<str> = Arc::from(id);
        let mut holdings = Vec::new();
        for r in allocation.devices.iter().flat_map(|d| d.results.iter().flatten()) {
            if r.admin_access == Some(true) {
                continue;
            }
            let share = r.share_id.as_ref().map(|_| {
                r.consumed_capacity
                    .iter()
                    .flatten()
                    .filter_map(|(name, q)| Some((name.clone(), Quantity::parse(&q.0).ok()?)))
                    .collect()
            });
            let pool = (
                inventory.tables.strings.str(&r.driver),
                inventory.tables.strings.str(&r.pool),
            );
            let mut holding = Holding {
                device: inventory.tables.strings.str(&r.device),
                pool,
                share,
                taken: None,
            };
            take_one(&mut holding, inventory, usage, reach);
            self.by_pool.entry(holding.pool.clone()).or_default().insert(id.clone());
            holdings.push(holding);
        }
        if !holdings.is_empty() {
            self.claims.insert(
                id,
                Held {
                    name: name.to_owned(),
                    holdings: holdings.into_boxed_slice(),
                },
            );
        }
    }

    /// Gives back everything claim `id` holds.
    pub(crate) fn remove(&mut self, id: &str, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
        let Some(mut held) = self.claims.remove(id) else { return };
        for holding in &mut held.holdings {
            release_one(holding, inventory, usage, reach);
            if let Some(ids) = self.by_pool.get_mut(&holding.pool) {
                ids.remove(id);
                if ids.is_empty() {
                    self.by_pool.remove(&holding.pool);
                }
            }
        }
    }

    /// Gives back what claim `id` holds, keeping the record so `take_claim` takes it again (a
    /// preemption probe: see `release_probe`).
    pub(crate) fn release_claim(&mut self, id: &str, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
        for holding in self.claims.get_mut(id).into_iter().flat_map(|h| h.holdings.iter_mut()) {
            release_one(holding, inventory, usage, reach);
        }
    }

    /// Takes again what claim `id` holds, after `release_claim`.
    pub(crate) fn take_claim(&mut self, id: &str, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
        for holding in self.claims.get_mut(id).into_iter().flat_map(|h| h.holdings.iter_mut()) {
            if holding.taken.is_none() {
                take_one(holding, inventory, usage, reach);
            }
        }
    }

    /// Gives back what every claim holds in pool `key` (before the pool changes).
    pub(crate) fn release_pool(&mut self, key: &PoolKey, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
        for id in self.by_pool.get(key).into_iter().flatten() {
            let held = self.claims.get_mut(id).expect("indexed claim");
            for holding in held.holdings.iter_mut().filter(|h| &h.pool == key) {
                release_one(holding, inventory, usage, reach);
            }
        }
    }

    /// Takes again what every claim holds in pool `key` (after the pool changed).
    pub(crate) fn take_pool(&mut self, key: &PoolKey, inventory: &Inventory, usage: &mut Usage, reach: &mut Reach) {
        for id in self.by_pool.get(key).into_iter().flatten() {
            let held = self.claims.get_mut(id).expect("indexed claim");
            for holding in held.holdings.iter_mut().filter(|h| &h.pool == key) {
                take_one(holding, inventory, usage, reach);
            }
        }
    }

    /// Recounts usage from scratch (after a panic may have left a search's picks in it).
    pub(crate) fn recount(&mut self, inventory: &Inventory, reach: &mut Reach) -> Usage {
        let mut usage = Usage::default();
        for held in self.claims.values_mut() {
            for holding in &mut held.holdings {
                holding.taken = None;
                take_one(holding, inventory, &mut usage, reach);
            }
        }
        usage
    }
}
