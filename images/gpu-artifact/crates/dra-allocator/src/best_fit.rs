//! The order in which candidates are tried: best fit, to keep MIG fragmentation low. Fewest
//! memory slices first, then least memory, then PCI address (then pool and device name, so the
//! order is total and stable). The scheduler instead takes the first solution in slice order.
//! Across nodes, the solution with the lowest score (memory slices, then memory) wins.

use dra_cel::Quantity;

use crate::inventory::Inventory;

/// Best-fit score of a solution: total memory slices, then total memory (lower is better).
pub(crate) type FitScore = (u64, Quantity);

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

/// The score of the devices a solution picked.
pub(crate) fn score(inventory: &Inventory, picked: impl Iterator<Item = u32>) -> FitScore {
    picked.fold((0, Quantity::ZERO), |(slices, memory), slot| {
        let raw = &inventory.device(slot).raw;
        (
            slices + u64::from(raw.kind.memory_slices),
            memory.saturating_add(raw.memory()),
        )
    })
}
