//! The order in which candidates are tried: best fit, to keep MIG fragmentation low. Fewest
//! memory slices first, then least memory, then PCI address (then pool and device name, so the
//! order is total and stable). The scheduler instead takes the first solution in slice order.

use k8s_openapi::api::resource::v1::Device;

use crate::inventory::CounterSet;
use dra_cel::Quantity;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct FitKey {
    pub memory_slices: u32,
    pub memory: Quantity,
    pub pci_address: String,
}

impl FitKey {
    pub(crate) fn of(
        device: &Device,
        consumes: &[(usize, Vec<(usize, Quantity)>)],
        staged_sets: &[CounterSet],
        first_set: usize,
    ) -> FitKey {
        let memory_slices = consumes
            .iter()
            .flat_map(|(set, amounts)| {
                let set = &staged_sets[set - first_set];
                amounts
                    .iter()
                    .filter(move |(i, q)| set.counters[*i].0.starts_with("memory-slice") && !q.is_zero())
            })
            .count() as u32;
        let memory = device
            .capacity
            .iter()
            .flatten()
            .find(|(name, _)| name.as_str() == "memory" || name.ends_with("/memory"))
            .and_then(|(_, c)| Quantity::parse(&c.value.0).ok())
            .unwrap_or_default();
        let pci_address = device
            .attributes
            .iter()
            .flatten()
            .find(|(name, _)| {
                matches!(
                    name.as_str(),
                    "pciAddress" | "gpu.deckhouse.io/pciAddress" | "resource.kubernetes.io/pciBusID"
                )
            })
            .and_then(|(_, a)| a.string.clone())
            .unwrap_or_default();
        FitKey {
            memory_slices,
            memory,
            pci_address,
        }
    }
}
