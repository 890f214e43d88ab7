//! What is in use: devices allocated exclusively, shares of multi-allocatable devices with their
//! consumed capacity, counters charged (once per device, also for shared devices: the fix of
//! dynamic-resource-allocation 89c46e8), and per physical card which kinds of allocation it
//! carries. Admin access takes a device from no one, but while its claim is being allocated it
//! charges counters (and a share's capacity) as the scheduler's `allocateDevice` does. Every
//! change returns an undo record, so the search can try and take back picks without copying the
//! state.

use dra_cel::Quantity;

use crate::fast_hash::FastMap;
use crate::inventory::{Device, Inventory};

/// How a device is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    Exclusive,
    Share,
    /// Admin access to a device that is not multi-allocatable: only its counters are charged,
    /// and only for the claim in flight (committed admin results take nothing).
    Admin,
    /// Admin access to a multi-allocatable device: a share for counters and capacity, but
    /// neither in use for others nor part of the card invariants.
    AdminShare,
}

impl Take {
    fn is_share(self) -> bool {
        matches!(self, Take::Share | Take::AdminShare)
    }

    /// Whether the take counts for the card invariants of ARCHITECTURE section 8.
    pub(crate) fn holds_card(self) -> bool {
        matches!(self, Take::Exclusive | Take::Share)
    }
}

#[derive(Debug, Default, Clone)]
pub(crate) struct CardUse {
    pub mig: u32,
    pub physical_exclusive: u32,
    /// Shared Physical offers in use on the card, with their share counts.
    pub shared_offers: FastMap<u32, u32>,
}

/// Counts, not sets: a device given to two claims (by two allocators racing) is still held by
/// the second when the first lets go.
#[derive(Default)]
pub(crate) struct Usage {
    /// Exclusive holders per device slot.
    pub exclusive: Vec<u16>,
    pub shares: FastMap<u32, u32>,
    pub shared_capacity: FastMap<u32, Vec<Quantity>>,
    pub counters_used: FastMap<u32, Box<[Quantity]>>,
    pub cards: FastMap<u32, CardUse>,
}

impl Usage {
    pub(crate) fn is_exclusive(&self, slot: u32) -> bool {
        self.exclusive.get(slot as usize).is_some_and(|n| *n > 0)
    }

    fn charge(&mut self, inventory: &Inventory, device: &Device, sign: i8) {
        for (set, positions) in device.consumes.iter() {
            let used = self.counters_used.entry(set).or_insert_with(|| {
                let len = inventory.counter_sets[set as usize]
                    .as_ref()
                    .map_or(0, |s| s.counters.0.len());
                vec![Quantity::ZERO; len].into()
            });
            for (i, amount) in positions.0.iter() {
                let i = *i as usize;
                used[i] = if sign > 0 {
                    used[i].saturating_add(*amount)
                } else {
                    used[i].saturating_sub(*amount)
                };
            }
        }
    }

    /// Whether charging the device's counters keeps every counter within its set's value.
    pub(crate) fn counters_fit(&self, inventory: &Inventory, device: &Device) -> bool {
        device.consumes.iter().all(|(set, positions)| {
            let used = self.counters_used.get(&set);
            let Some(counters) = inventory.counter_sets[set as usize].as_ref() else {
                return false;
            };
            positions.0.iter().all(|(i, amount)| {
                let already = used.map_or(Quantity::ZERO, |u| u[*i as usize]);
                already.saturating_add(*amount) <= counters.counters.0[*i as usize].1
            })
        })
    }

    /// Whether the counters must be charged for this take: always for a device that is not
    /// multi-allocatable (admin access too, as `checkAvailableCounters` runs for it), for a
    /// multi-allocatable one only on its first share (the scheduler's `skipCounterCheck`).
    pub(crate) fn charges_counters(&self, index: u32, take: Take) -> bool {
        !take.is_share() || !self.shares.contains_key(&index)
    }

    /// ARCHITECTURE section 8: MIG only with MIG; an exclusive Physical alone; shared Physical
    /// allocations of one card through one offer (one offer is one strategy).
    pub(crate) fn card_allows(&self, index: u32, device: &Device, take: Take) -> bool {
        let Some(card) = device.card.and_then(|c| self.cards.get(&c)) else {
            return true;
        };
        if device.raw.kind.is_mig {
            return card.physical_exclusive == 0 && card.shared_offers.is_empty();
        }
        match take {
            Take::Exclusive => card.mig == 0 && card.physical_exclusive == 0 && card.shared_offers.is_empty(),
            Take::Share => {
                card.mig == 0 && card.physical_exclusive == 0 && card.shared_offers.keys().all(|offer| *offer == index)
            }
            Take::Admin | Take::AdminShare => true,
        }
    }

    /// Records a take. `consumed` lists the capacity consumed by a share, in the device's
    /// capacity order.
    pub(crate) fn take(&mut self, inventory: &Inventory, index: u32, take: Take, consumed: Option<&[Quantity]>) {
        let device = inventory.device(index);
        if self.charges_counters(index, take) {
            self.charge(inventory, device, 1);
        }
        match take {
            Take::Exclusive => {
                let slot = index as usize;
                if self.exclusive.len() <= slot {
                    self.exclusive.resize(slot + 1, 0);
                }
                self.exclusive[slot] += 1;
            }
            Take::Admin => {}
            Take::Share | Take::AdminShare => {
                *self.shares.entry(index).or_default() += 1;
                if let Some(consumed) = consumed {
                    let total = self
                        .shared_capacity
                        .entry(index)
                        .or_insert_with(|| vec![Quantity::ZERO; consumed.len()]);
                    for (t, c) in total.iter_mut().zip(consumed) {
                        *t = t.saturating_add(*c);
                    }
                }
            }
        }
        if let Some(card) = device.card.filter(|_| take.holds_card()) {
            let card = self.cards.entry(card).or_default();
            if device.raw.kind.is_mig {
                card.mig += 1;
            } else if take == Take::Exclusive {
                card.physical_exclusive += 1;
            } else {
                *card.shared_offers.entry(index).or_default() += 1;
            }
        }
    }

    /// Takes back exactly what `take` with the same arguments recorded.
    pub(crate) fn release(&mut self, inventory: &Inventory, index: u32, take: Take, consumed: Option<&[Quantity]>) {
        let device = inventory.device(index);
        match take {
            Take::Exclusive => {
                if let Some(count) = self.exclusive.get_mut(index as usize) {
                    *count = count.saturating_sub(1);
                }
            }
            Take::Admin => {}
            Take::Share | Take::AdminShare => {
                let count = self.shares.entry(index).or_default();
                *count -= 1;
                if *count == 0 {
                    self.shares.remove(&index);
                    self.shared_capacity.remove(&index);
                }
                if let (Some(consumed), Some(total)) = (consumed, self.shared_capacity.get_mut(&index)) {
                    for (t, c) in total.iter_mut().zip(consumed) {
                        *t = t.saturating_sub(*c);
                    }
                }
            }
        }
        if self.charges_counters(index, take) {
            self.charge(inventory, device, -1);
        }
        if let Some(card) = device
            .card
            .filter(|_| take.holds_card())
            .and_then(|c| self.cards.get_mut(&c))
        {
            if device.raw.kind.is_mig {
                card.mig -= 1;
            } else if take == Take::Exclusive {
                card.physical_exclusive -= 1;
            } else if let Some(count) = card.shared_offers.get_mut(&index) {
                *count -= 1;
                if *count == 0 {
                    card.shared_offers.remove(&index);
                }
            }
        }
    }
}

impl Usage {
    /// Drops what is recorded for counter sets and cards that no longer exist (their pool was
    /// rebuilt or removed after everything in it was released).
    pub(crate) fn forget_sets(&mut self, inventory: &Inventory) {
        let live = |set: &u32| inventory.counter_sets.get(*set as usize).is_some_and(Option::is_some);
        self.counters_used
            .retain(|set, used| live(set) && !used.iter().all(Quantity::is_zero));
        self.cards.retain(|card, held| {
            live(card) && (held.mig > 0 || held.physical_exclusive > 0 || !held.shared_offers.is_empty())
        });
    }
}
