//! The order in which candidates are tried: best fit, to keep MIG fragmentation low. Fewest
//! memory slices first, then least memory, then PCI address (then pool and device name, so the
//! order is total and stable). The scheduler instead takes the first solution in slice order.
//! Among devices as good by those, a shared offer that already carries shares comes first, and
//! across nodes a solution that opens no shared offer nobody shared yet wins: shares fill a card
//! before they take another, so whole cards stay free (two 50% shares land on one card).
//! Across nodes, the solution with the lowest score wins: memory slices, then memory, then shared
//! offers opened, then, for a claim with a multi-device request, whether it would be the first on its node (packing: a node
//! nobody uses is taken only when no node in use can hold the claim, however spread) and how
//! spread its multi-device requests are (see `topology`).

use dra_cel::Quantity;

use crate::inventory::Inventory;
use crate::search::Pick;
use crate::topology::{Spread, add, place, spread_of};
use crate::usage::{Take, Usage};

/// Best-fit score of a solution: total memory slices, then total memory, then how many shared
/// offers it is the first share of, then whether it opens a node nobody uses and the spread of its
/// multi-device requests (lower is better).
pub(crate) type FitScore = (u64, Quantity, u32, (bool, Spread));

/// Sorts device slots into best-fit order.
pub(crate) fn fit_order(inventory: &Inventory, devices: &mut [u32]) {
    devices.sort_by_cached_key(|slot| {
        let device = inventory.device(*slot);
        (
            device.raw.kind.memory_slices,
            device.raw.memory(),
            device.raw.pci_address(),
            &*inventory.pool(device.pool).name,
            &**device.raw.name(),
        )
    });
}

/// The score of the devices a solution picked (in request order, as the search picks them), read
/// while they are still taken in `usage`; that it opens a node is for the caller to say (see
/// `grouped_search`).
pub(crate) fn score(inventory: &Inventory, usage: &Usage, picks: &[Pick]) -> FitScore {
    let (slices, memory) = picks.iter().fold((0, Quantity::ZERO), |(slices, memory), pick| {
        let raw = &inventory.device(pick.device).raw;
        (
            slices + u64::from(raw.kind.memory_slices),
            memory.saturating_add(raw.memory()),
        )
    });
    let spread = picks
        .chunk_by(|a, b| a.request == b.request)
        .map(|request| {
            let places: Vec<_> = request.iter().map(|p| place(&inventory.device(p.device).raw)).collect();
            spread_of(&places)
        })
        .fold((0, 0, 0), add);
    let opened = picks
        .iter()
        .filter(|pick| pick.take == Take::Share && usage.shares.get(&pick.device) == Some(&1))
        .count() as u32;
    (slices, memory, opened, (false, spread))
}

/// Moves shared offers that already carry shares before the others as good by memory slices and
/// memory, keeping best-fit order otherwise (a stable sort; nothing moves while no share is held).
pub(crate) fn shares_first(inventory: &Inventory, usage: &Usage, devices: &mut [u32]) {
    if !devices.iter().any(|slot| usage.shares.contains_key(slot)) {
        return;
    }
    devices.sort_by_cached_key(|slot| {
        let raw = &inventory.device(*slot).raw;
        (raw.kind.memory_slices, raw.memory(), !usage.shares.contains_key(slot))
    });
}
