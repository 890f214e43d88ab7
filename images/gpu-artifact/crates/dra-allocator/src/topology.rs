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

use crate::device::{AttrList, AttrValue, RawDevice};
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

/// Whether an attribute list publishes a part of a place.
pub(crate) fn publishes_a_place(list: &AttrList) -> bool {
    [NVLINK_DOMAIN, PCIE_ROOT, NUMA_NODE]
        .iter()
        .any(|name| list.get(name).is_some())
}

/// Reads the places of one request's candidates, each card's once: the offers of a card share its
/// attribute list (`common`), and a kind of offer that publishes a place of its own is marked when
/// its slice is read, so a node's hundreds of offers come down to its few cards (the per-offer
/// lookups were most of what topology added to a claim of two devices).
#[derive(Default)]
pub(crate) struct PlaceReader<'a> {
    /// Card attribute lists, by address, and the place they give.
    commons: Vec<(*const AttrList, Place<'a>)>,
}

impl<'a> PlaceReader<'a> {
    pub(crate) fn place(&mut self, raw: &'a RawDevice) -> Place<'a> {
        if raw.kind.places_itself {
            return place(raw);
        }
        let common: &'a AttrList = &raw.placement.common;
        if let Some((_, place)) = self.commons.iter().find(|(list, _)| std::ptr::eq(*list, common)) {
            return *place;
        }
        let place = Place {
            nvlink: common.get(NVLINK_DOMAIN),
            root: common.get(PCIE_ROOT),
            numa: common.get(NUMA_NODE),
        };
        self.commons.push((common, place));
        place
    }
}

/// The same place: by address first (the places of one card's offers are read from one list).
fn same_place(a: &Place<'_>, b: &Place<'_>) -> bool {
    let same = |x: Option<&AttrValue>, y: Option<&AttrValue>| match (x, y) {
        (Some(x), Some(y)) => std::ptr::eq(x, y) || x == y,
        (x, y) => x.is_none() && y.is_none(),
    };
    same(a.nvlink, b.nvlink) && same(a.root, b.root) && same(a.numa, b.numa)
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
    mut place_of: impl FnMut(u32) -> Place<'a>,
    available: impl Fn(u32) -> bool,
    needed: usize,
) -> Vec<Vec<u32>> {
    // The distinct places first (in the order of their first candidate), so that each tier groups
    // a node's few cards rather than its every offer.
    let mut places: Vec<Place<'a>> = Vec::new();
    let mut slots: Vec<(u32, usize, bool)> = Vec::with_capacity(candidates.len());
    for &slot in candidates {
        let place = place_of(slot);
        let index = match places.iter().position(|p| same_place(p, &place)) {
            Some(index) => index,
            None => {
                places.push(place);
                places.len() - 1
            }
        };
        slots.push((slot, index, available(slot)));
    }
    let mut offered: Vec<Vec<u32>> = Vec::new();
    for tier in &TIERS {
        // Each place's group in this tier; groups in the order of their first candidate.
        let mut keys: Vec<Key<'a>> = Vec::new();
        let group_of: Vec<Option<usize>> = places
            .iter()
            .map(|place| {
                let key = key(place, tier)?;
                Some(keys.iter().position(|k| *k == key).unwrap_or_else(|| {
                    keys.push(key);
                    keys.len() - 1
                }))
            })
            .collect();
        let mut tier_groups: Vec<(Vec<u32>, usize)> = vec![(Vec::new(), 0); keys.len()];
        for (slot, place, free) in &slots {
            if let Some(group) = group_of[*place] {
                tier_groups[group].0.push(*slot);
                tier_groups[group].1 += usize::from(*free);
            }
        }
        // Stable: groups of equal tightness keep the order of their first device.
        tier_groups.sort_by_key(|(_, free)| *free);
        for (slots, free) in tier_groups {
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
