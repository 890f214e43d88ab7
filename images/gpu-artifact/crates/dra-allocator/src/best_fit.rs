//! The order in which candidates are tried: best fit, to keep MIG fragmentation low. Fewest
//! memory slices first, then least memory, then PCI address (then pool and device name, so the
//! order is total and stable). The scheduler instead takes the first solution in slice order.
//! Across nodes, the solution with the lowest score wins: memory slices, then memory, then, for a
//! claim with a multi-device request, whether it would be the first on its node (packing: a node
//! nobody uses is taken only when no node in use can hold the claim, however spread) and how
//! spread its multi-device requests are (see `topology`).

use dra_cel::Quantity;

use crate::inventory::Inventory;
use crate::search::Pick;
use crate::topology::{Spread, add, place, spread_of};

/// Best-fit score of a solution: total memory slices, then total memory, then whether it opens a
/// node nobody uses and the spread of its multi-device requests (lower is better).
pub(crate) type FitScore = (u64, Quantity, (bool, Spread));

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

/// The score of the devices a solution picked (in request order, as the search picks them); that
/// it opens a node is for the caller to say (see `grouped_search`).
pub(crate) fn score(inventory: &Inventory, picks: &[Pick]) -> FitScore {
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
    (slices, memory, (false, spread))
}
