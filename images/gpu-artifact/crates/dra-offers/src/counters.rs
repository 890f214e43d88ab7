//! The per-card counter set and what each offer consumes from it. This is what keeps the scheduler
//! safe: the whole card consumes every counter, a MIG placement consumes its memory slices, its
//! memory and its engines, so overlapping offers of one card cannot be allocated together.
//!
//! Engine counters follow NVIDIA's DRA driver: the card's value of each engine is the maximum over
//! its MIG profiles (the full-card profile has the most), and `+me` profiles, whose media engines
//! exist once per card, are kept apart by those small counts.

use std::collections::BTreeMap;

use gpu_vendor::{GpuInventory, MigEngines, MigPlacement, MigProfile};

use crate::names::memory_slice_counter;

const MIB: u64 = 1024 * 1024;

/// Counter name -> value (bytes for `memory`, a count for everything else).
pub type CounterValues = BTreeMap<String, u64>;

/// The counters of one card: `memory` always; `memory-slice-<i>` and the engine counters when the
/// card supports MIG.
pub fn card_counters(card: &GpuInventory) -> CounterValues {
    let profiles = card.mig.as_ref().map(|mig| mig.profiles.as_slice()).unwrap_or_default();
    // A profile can never be bigger than the card; take the larger so a MIG offer always fits.
    let memory_mib = profiles.iter().map(|p| p.memory_mib).fold(card.memory_mib, u64::max);
    let mut counters = CounterValues::from([("memory".to_owned(), memory_mib * MIB)]);
    let Some(mig) = &card.mig else {
        return counters;
    };
    let placement_end = profiles.iter().flat_map(|p| &p.placements).map(MigPlacement::end).max();
    let slices = placement_end.unwrap_or(0).max(mig.memory_slices);
    for slice in 0..slices {
        counters.insert(memory_slice_counter(slice), 1);
    }
    let mut most = MigEngines::default();
    for engines in profiles.iter().map(|p| p.engines) {
        most = MigEngines {
            multiprocessors: most.multiprocessors.max(engines.multiprocessors),
            copy_engines: most.copy_engines.max(engines.copy_engines),
            decoders: most.decoders.max(engines.decoders),
            encoders: most.encoders.max(engines.encoders),
            jpeg_engines: most.jpeg_engines.max(engines.jpeg_engines),
            ofa_engines: most.ofa_engines.max(engines.ofa_engines),
        };
    }
    counters.extend(engine_counters(&most));
    counters
}

/// What one MIG placement consumes: the profile's memory, one of each memory slice it covers, and
/// the profile's engines.
pub fn mig_consumption(profile: &MigProfile, placement: MigPlacement) -> CounterValues {
    let mut counters = CounterValues::from([("memory".to_owned(), profile.memory_mib * MIB)]);
    for slice in placement.start..placement.end() {
        counters.insert(memory_slice_counter(slice), 1);
    }
    counters.extend(engine_counters(&profile.engines));
    counters
}

fn engine_counters(engines: &MigEngines) -> [(String, u64); 6] {
    [
        ("multiprocessors", engines.multiprocessors),
        ("copy-engines", engines.copy_engines),
        ("decoders", engines.decoders),
        ("encoders", engines.encoders),
        ("jpeg-engines", engines.jpeg_engines),
        ("ofa-engines", engines.ofa_engines),
    ]
    .map(|(name, value)| (name.to_owned(), u64::from(value)))
}

/// Whether offers consuming `each` fit in `available` together (what the scheduler checks).
pub fn fit_together(available: &CounterValues, each: &[&CounterValues]) -> bool {
    available.iter().all(|(name, capacity)| {
        let used: u64 = each.iter().filter_map(|c| c.get(name)).sum();
        used <= *capacity
    }) && each.iter().all(|c| c.keys().all(|name| available.contains_key(name)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_vendor::{MigCapabilities, MigMode, MigState};

    fn card(mig: Option<MigCapabilities>) -> GpuInventory {
        GpuInventory {
            pci_address: "0000:01:00.0".parse().unwrap(),
            uuid: "GPU-1".into(),
            product_name: "NVIDIA T4".into(),
            architecture: None,
            board_part_number: None,
            memory_mib: 16384,
            compute_capability: None,
            driver_version: "580.76.05".into(),
            runtime_version: None,
            power_limits: None,
            mig,
            nvlink_remotes: Vec::new(),
        }
    }

    #[test]
    fn a_card_without_mig_has_only_memory() {
        let counters = card_counters(&card(None));
        assert_eq!(counters, CounterValues::from([("memory".into(), 16384 * MIB)]));
    }

    #[test]
    fn engines_are_the_maximum_over_profiles_and_slices_cover_every_placement() {
        let profile = |name: &str, multiprocessors, ofa_engines, start, size| MigProfile {
            id: 0,
            name: name.into(),
            memory_mib: 4096 * u64::from(size),
            slice_count: size,
            max_instances: 1,
            engines: MigEngines {
                multiprocessors,
                ofa_engines,
                ..MigEngines::default()
            },
            placements: vec![MigPlacement { start, size }],
        };
        let mig = MigCapabilities {
            mode: MigMode {
                current: MigState::Disabled,
                pending: MigState::Disabled,
            },
            memory_slices: 2,
            profiles: vec![profile("1g.4gb+me", 10, 1, 0, 1), profile("3g.12gb", 30, 0, 0, 3)],
        };
        let counters = card_counters(&card(Some(mig)));
        assert_eq!(counters["multiprocessors"], 30);
        assert_eq!(counters["ofa-engines"], 1);
        assert_eq!(counters["encoders"], 0);
        let slices: Vec<_> = counters.keys().filter(|k| k.starts_with("memory-slice-")).collect();
        assert_eq!(slices, ["memory-slice-0", "memory-slice-1", "memory-slice-2"]);
        assert_eq!(counters["memory"], 16384 * MIB);
    }
}
