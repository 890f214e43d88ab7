//! What is in use: devices allocated exclusively, shares of multi-allocatable devices with their
//! consumed capacity, counters charged (once per device, also for shared devices: the fix of
//! dynamic-resource-allocation 89c46e8), and per physical card which kinds of allocation it
//! carries. Admin access takes a device from no one, but while its claim is being allocated it
//! charges counters (and a share's capacity) as the scheduler's `allocateDevice` does. Every
//! change returns an undo record, so the search can try and take back picks without copying the
//! state.

use std::collections::{HashMap, HashSet};

use dra_cel::Quantity;

use crate::inventory::{IndexedDevice, Inventory};

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
    pub shared_offers: HashMap<usize, u32>,
}

#[derive(Default)]
pub(crate) struct Usage {
    pub exclusive: HashSet<usize>,
    pub shares: HashMap<usize, u32>,
    pub shared_capacity: HashMap<usize, Vec<Quantity>>,
    pub counters_used: HashMap<usize, Vec<Quantity>>,
    pub cards: HashMap<usize, CardUse>,
}

pub(crate) fn is_mig(device: &IndexedDevice) -> bool {
    device.device.attributes.iter().flatten().any(|(name, value)| {
        (name == "deviceType" || name == "gpu.deckhouse.io/deviceType") && value.string.as_deref() == Some("MIG")
    })
}

impl Usage {
    fn charge(&mut self, inventory: &Inventory, device: &IndexedDevice, sign: i8) {
        for (set, amounts) in &device.consumes {
            let used = self
                .counters_used
                .entry(*set)
                .or_insert_with(|| vec![Quantity::ZERO; inventory.counter_sets[*set].counters.len()]);
            for (i, amount) in amounts {
                used[*i] = if sign > 0 {
                    used[*i].saturating_add(*amount)
                } else {
                    used[*i].saturating_sub(*amount)
                };
            }
        }
    }

    /// Whether charging the device's counters keeps every counter within its set's value.
    pub(crate) fn counters_fit(&self, inventory: &Inventory, device: &IndexedDevice) -> bool {
        device.consumes.iter().all(|(set, amounts)| {
            let used = self.counters_used.get(set);
            amounts.iter().all(|(i, amount)| {
                let already = used.map_or(Quantity::ZERO, |u| u[*i]);
                already.saturating_add(*amount) <= inventory.counter_sets[*set].counters[*i].1
            })
        })
    }

    /// Whether the counters must be charged for this take: always for a device that is not
    /// multi-allocatable (admin access too, as `checkAvailableCounters` runs for it), for a
    /// multi-allocatable one only on its first share (the scheduler's `skipCounterCheck`).
    pub(crate) fn charges_counters(&self, index: usize, take: Take) -> bool {
        !take.is_share() || !self.shares.contains_key(&index)
    }

    /// ARCHITECTURE section 8: MIG only with MIG; an exclusive Physical alone; shared Physical
    /// allocations of one card through one offer (one offer is one strategy).
    pub(crate) fn card_allows(&self, index: usize, device: &IndexedDevice, take: Take) -> bool {
        let Some(card) = device.card.and_then(|c| self.cards.get(&c)) else {
            return true;
        };
        if is_mig(device) {
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
    pub(crate) fn take(&mut self, inventory: &Inventory, index: usize, take: Take, consumed: Option<&[Quantity]>) {
        let device = &inventory.devices[index];
        if self.charges_counters(index, take) {
            self.charge(inventory, device, 1);
        }
        match take {
            Take::Exclusive => {
                self.exclusive.insert(index);
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
            if is_mig(device) {
                card.mig += 1;
            } else if take == Take::Exclusive {
                card.physical_exclusive += 1;
            } else {
                *card.shared_offers.entry(index).or_default() += 1;
            }
        }
    }

    /// Takes back exactly what `take` with the same arguments recorded.
    pub(crate) fn release(&mut self, inventory: &Inventory, index: usize, take: Take, consumed: Option<&[Quantity]>) {
        let device = &inventory.devices[index];
        match take {
            Take::Exclusive => {
                self.exclusive.remove(&index);
            }
            Take::Admin => {}
            Take::Share | Take::AdminShare => {
                let count = self.shares.entry(index).or_default();
                *count -= 1;
                if *count == 0 {
                    self.shares.remove(&index);
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
            if is_mig(device) {
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
