//! Topology-aware best fit for a request of several devices: its devices as close together as the
//! node allows, the same NVLink domain first, then the same PCIe root complex, then the same NUMA
//! node. Closeness is read from the attributes the node publishes on every offer of a card:
//! `gpu.deckhouse.io/nvlinkDomain` (the cards NVLink joins, directly or through NVSwitches),
//! `resource.kubernetes.io/pcieRoot` and `resource.kubernetes.io/numaNode` (KEP-6072's standard
//! attribute, an int from sysfs `numa_node`; `k8s.io/dynamic-resource-allocation/deviceattribute`
//! v0.37).
//!
//! Topology only chooses among the allocations the search finds, and the search takes only what
//! the scheduler would accept: before the unrestricted search, the request's candidates are
//! restricted to one group of devices that share a place (a NUMA node under one PCIe root in one
//! NVLink domain, then looser groupings), tightest group first, so a group that just fits is used
//! before one that a larger request would need whole. A request no group can hold falls back to
//! the unrestricted search. The spread of the result also ranks the nodes (see `best_fit`), after
//! memory slices and memory, before the node's name.

use crate::device::{AttrValue, RawDevice};
use crate::request::Request;

pub(crate) const NVLINK_DOMAIN: &str = "gpu.deckhouse.io/nvlinkDomain";
pub(crate) const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
pub(crate) const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";

/// How spread one solution's multi-device requests are: NVLink domains, PCIe roots and NUMA nodes
/// beyond the first of each request, summed over the requests (lexicographic; lower is closer). A
/// device that does not publish one of them counts as a place of its own.
pub(crate) type Spread = (u16, u16, u16);

/// Where a device sits, as far as its attributes say.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Place<'a> {
    nvlink: Option<&'a AttrValue>,
    root: Option<&'a AttrValue>,
    numa: Option<&'a AttrValue>,
}

pub(crate) fn place(raw: &RawDevice) -> Place<'_> {
    let attributes = raw.attributes();
    Place {
        nvlink: attributes.get(NVLINK_DOMAIN),
        root: attributes.get(PCIE_ROOT),
        numa: attributes.get(NUMA_NODE),
    }
}

/// How many distinct places `values` are, a missing one counting as its own.
fn distinct<'a>(values: impl Iterator<Item = Option<&'a AttrValue>>) -> u16 {
    let mut seen: Vec<&AttrValue> = Vec::new();
    let mut count = 0;
    for value in values {
        match value {
            Some(value) if seen.contains(&value) => {}
            Some(value) => {
                seen.push(value);
                count += 1;
            }
            None => count += 1,
        }
    }
    count
}

/// The spread of one request's devices.
pub(crate) fn spread_of(places: &[Place<'_>]) -> Spread {
    if places.len() < 2 {
        return (0, 0, 0);
    }
    let beyond_first = |n: u16| n.saturating_sub(1);
    (
        beyond_first(distinct(places.iter().map(|p| p.nvlink))),
        beyond_first(distinct(places.iter().map(|p| p.root))),
        beyond_first(distinct(places.iter().map(|p| p.numa))),
    )
}

/// Adds two spreads, part by part.
pub(crate) fn add(a: Spread, b: Spread) -> Spread {
    (
        a.0.saturating_add(b.0),
        a.1.saturating_add(b.1),
        a.2.saturating_add(b.2),
    )
}

/// The groupings tried, closest first: which parts of the place a group shares.
const TIERS: [[bool; 3]; 5] = [
    // One NUMA node under one PCIe root in one NVLink domain.
    [true, true, true],
    // One NUMA node in one NVLink domain.
    [true, false, true],
    // One NVLink domain.
    [true, false, false],
    // No NVLink between them: one NUMA node under one PCIe root.
    [false, true, true],
    // One NUMA node.
    [false, false, true],
];

type Key<'a> = [Option<&'a AttrValue>; 3];

/// The key of `place` in `tier`: `None` when it lacks a part the tier shares.
fn key<'a>(place: &Place<'a>, tier: &[bool; 3]) -> Option<Key<'a>> {
    let parts = [place.nvlink, place.root, place.numa];
    let mut key = [None; 3];
    for (i, shared) in tier.iter().enumerate() {
        if *shared {
            key[i] = Some(parts[i]?);
        }
    }
    Some(key)
}

/// The first request with an alternative of several devices: the one topology groups.
pub(crate) fn grouped_request(requests: &[Request<'_>]) -> Option<usize> {
    requests
        .iter()
        .position(|r| r.alternatives.iter().any(|a| a.count.is_some_and(|n| n >= 2)))
}

/// The groups of `candidates` (slots, in best-fit order) to try in turn, closest tier first and,
/// within a tier, those with the fewest `available` devices first (ties: the group whose first
/// device comes first). A group with fewer available devices than `needed`, or one already
/// offered (the same devices at a looser tier), is left out.
pub(crate) fn groups<'a>(
    candidates: &[u32],
    place_of: impl Fn(u32) -> Place<'a>,
    available: impl Fn(u32) -> bool,
    needed: usize,
) -> Vec<Vec<u32>> {
    let places: Vec<(u32, Place<'a>, bool)> = candidates
        .iter()
        .map(|&slot| (slot, place_of(slot), available(slot)))
        .collect();
    let mut offered: Vec<Vec<u32>> = Vec::new();
    for tier in &TIERS {
        let mut tier_groups: Vec<(Key<'a>, Vec<u32>, usize)> = Vec::new();
        for (slot, place, free) in &places {
            let Some(key) = key(place, tier) else {
                continue;
            };
            match tier_groups.iter_mut().find(|(k, _, _)| *k == key) {
                Some((_, slots, free_count)) => {
                    slots.push(*slot);
                    *free_count += usize::from(*free);
                }
                None => tier_groups.push((key, vec![*slot], usize::from(*free))),
            }
        }
        // Stable: groups of equal tightness keep the order of their first device.
        tier_groups.sort_by_key(|(_, _, free)| *free);
        for (_, slots, free) in tier_groups {
            if free >= needed && slots.len() < candidates.len() && !offered.contains(&slots) {
                offered.push(slots);
            }
        }
    }
    offered
}

#[cfg(test)]
#[path = "topology_tests.rs"]
mod tests;
