//! A device as the engine keeps it: what selectors, constraints, counters, capacity, taints and
//! best fit read, with everything many devices share held once (see `intern`). Attributes are
//! split in two shared lists: those common to the device's card (every device of a slice that
//! consumes the same counter set: PCI address, UUIDs, model) and the device's own (offer type, MIG
//! profile), which is the same on every card of a model.

use std::sync::Arc;

use dra_cel::{AttributeValue, Quantity};
use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, DeviceAttribute, DeviceTaint};

use crate::node_selection::NodeBinding;

/// One attribute value (`Empty`: the attribute carries no value, which a selector cannot read).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum AttrValue {
    Int(i64),
    Bool(bool),
    String(Arc<str>),
    Version(Arc<str>),
    Empty,
}

impl AttrValue {
    pub(crate) fn of(attribute: &DeviceAttribute, strings: &mut crate::intern::Dedup<str>) -> AttrValue {
        match AttributeValue::of(attribute) {
            Some(AttributeValue::Int(i)) => AttrValue::Int(i),
            Some(AttributeValue::Bool(b)) => AttrValue::Bool(b),
            Some(AttributeValue::String(s)) => AttrValue::String(strings.str(s)),
            Some(AttributeValue::Version(v)) => AttrValue::Version(strings.str(v)),
            None => AttrValue::Empty,
        }
    }

    pub(crate) fn as_cel(&self) -> Option<AttributeValue<'_>> {
        match self {
            AttrValue::Int(i) => Some(AttributeValue::Int(*i)),
            AttrValue::Bool(b) => Some(AttributeValue::Bool(*b)),
            AttrValue::String(s) => Some(AttributeValue::String(s)),
            AttrValue::Version(v) => Some(AttributeValue::Version(v)),
            AttrValue::Empty => None,
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::String(s) => Some(s),
            _ => None,
        }
    }
}

/// One published attribute, its name and value, held once for every device that carries it
/// alike (a MIG offer's profile, a card's UUID on each of its offers).
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Attr(pub Arc<str>, pub AttrValue);

/// Attributes sorted by their name as published (qualified or not).
#[derive(Debug, PartialEq, Eq, Hash, Default)]
pub(crate) struct AttrList(pub Box<[Arc<Attr>]>);

/// Compares `name` with `<domain>/<id>` without building the latter.
fn cmp_qualified(name: &str, domain: &str, id: &str) -> std::cmp::Ordering {
    let bytes = name.as_bytes();
    let (d, rest) = bytes.split_at(bytes.len().min(domain.len()));
    d.cmp(domain.as_bytes())
        .then_with(|| rest.first().cmp(&Some(&b'/')))
        .then_with(|| rest.get(1..).unwrap_or_default().cmp(id.as_bytes()))
}

impl AttrList {
    pub(crate) fn get(&self, name: &str) -> Option<&AttrValue> {
        self.0
            .binary_search_by(|attr| (*attr.0).cmp(name))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub(crate) fn get_qualified(&self, domain: &str, id: &str) -> Option<&AttrValue> {
        self.0
            .binary_search_by(|attr| cmp_qualified(&attr.0, domain, id))
            .ok()
            .map(|i| &self.0[i].1)
    }

    pub(crate) fn has_domain(&self, domain: &str) -> bool {
        self.0
            .iter()
            .any(|attr| attr.0.split_once('/').is_some_and(|(d, _)| d == domain))
    }
}

/// A device's attributes: its card's and its own, read in place.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    pub common: &'a AttrList,
    pub own: &'a AttrList,
}

impl<'a> Attributes<'a> {
    pub(crate) fn get(&self, name: &str) -> Option<&'a AttrValue> {
        let (own, common) = (self.own, self.common);
        own.get(name).or_else(|| common.get(name))
    }

    /// The attribute published as `<domain>/<id>`.
    pub(crate) fn get_qualified(&self, domain: &str, id: &str) -> Option<&'a AttrValue> {
        let (own, common) = (self.own, self.common);
        own.get_qualified(domain, id)
            .or_else(|| common.get_qualified(domain, id))
    }

    /// Whether any attribute is published in `domain`.
    pub(crate) fn has_domain(&self, domain: &str) -> bool {
        self.own.has_domain(domain) || self.common.has_domain(domain)
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = (&'a str, &'a AttrValue)> {
        self.common
            .0
            .iter()
            .chain(self.own.0.iter())
            .map(|attr| (&*attr.0, &attr.1))
    }

    /// `lookupAttribute` of the scheduler: the fully qualified name, or the bare name when the
    /// domain is the device's driver.
    pub(crate) fn lookup(&self, name: &str, driver: &str) -> Option<&'a AttrValue> {
        if let Some(found) = self.get(name) {
            return Some(found);
        }
        let (domain, id) = name.split_once('/')?;
        if domain == driver { self.get(id) } else { None }
    }
}

/// One capacity: its name, value and request policy.
pub(crate) type CapacityEntry = (Arc<str>, Quantity, Option<CapacityRequestPolicy>);

/// Capacities in name order, with their request policies.
pub(crate) struct Capacity(pub Box<[CapacityEntry]>);

impl Capacity {
    pub(crate) fn get(&self, name: &str) -> Option<Quantity> {
        self.0.iter().find(|(n, _, _)| &**n == name).map(|(_, q, _)| *q)
    }

    pub(crate) fn get_qualified(&self, domain: &str, id: &str) -> Option<Quantity> {
        self.0
            .iter()
            .find(|(n, _, _)| cmp_qualified(n, domain, id).is_eq())
            .map(|(_, q, _)| *q)
    }

    pub(crate) fn has_domain(&self, domain: &str) -> bool {
        self.0
            .iter()
            .any(|(n, _, _)| n.split_once('/').is_some_and(|(d, _)| d == domain))
    }
}

/// A consumption of one counter set: amounts by counter name.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Amounts(pub Box<[(Arc<str>, Quantity)]>);

/// What a device consumes, by counter set name: the same on the same card of every node of a
/// model, so held once for all of them.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Consumes(pub Box<[(Arc<str>, Arc<Amounts>)]>);

/// What a device is apart from its card's attributes and its node: its name, own attributes,
/// capacity, counter consumption, taints and flags. The same for one offer of one card position on
/// every node of a model (the name and the consumption name the card), so one copy serves them
/// all; compared by the identity of its parts, each a shared copy already (taints are not shared:
/// a tainted device has a kind of its own).
pub(crate) struct Kind {
    pub name: Arc<str>,
    pub taints: Option<Arc<Vec<DeviceTaint>>>,
    pub own: Arc<AttrList>,
    pub capacity: Arc<Capacity>,
    pub consumes: Arc<Consumes>,
    /// Best fit: how many memory slices it consumes.
    pub memory_slices: u16,
    pub shared: bool,
    pub has_binding_conditions: bool,
    pub is_mig: bool,
    /// Whether its own attributes say where it sits (see `topology`): rare, a card's offers share
    /// their place in its common attributes. A function of `own`, so not part of its identity.
    pub places_itself: bool,
}

/// A kind's parts by address, and its numbers and flags.
type KindIdentity = (
    *const str,
    Option<*const Vec<DeviceTaint>>,
    *const AttrList,
    *const Capacity,
    *const Consumes,
    u16,
    [bool; 3],
);

impl Kind {
    fn identity(&self) -> KindIdentity {
        (
            Arc::as_ptr(&self.name),
            self.taints.as_ref().map(Arc::as_ptr),
            Arc::as_ptr(&self.own),
            Arc::as_ptr(&self.capacity),
            Arc::as_ptr(&self.consumes),
            self.memory_slices,
            [self.shared, self.has_binding_conditions, self.is_mig],
        )
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Kind) -> bool {
        self.identity() == other.identity()
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.identity().hash(state);
    }
}

/// Where a device is: its card's common attributes and its node selection. Shared by the devices
/// of one card in one slice that have the slice's node selection.
pub(crate) struct Placement {
    /// The attributes common to its card.
    pub common: Arc<AttrList>,
    /// Its node selection: its own (`perDeviceNodeSelection`), else its slice's (shared).
    pub binding: Arc<NodeBinding>,
}

/// The published device, parsed. One is kept per device of the cluster (200,000 at 1,000 nodes),
/// so it is two pointers to shared parts: 16 bytes.
pub(crate) struct RawDevice {
    pub kind: Arc<Kind>,
    pub placement: Arc<Placement>,
}

impl RawDevice {
    pub(crate) fn binding(&self) -> &Arc<NodeBinding> {
        &self.placement.binding
    }

    pub(crate) fn name(&self) -> &Arc<str> {
        &self.kind.name
    }

    pub(crate) fn taints(&self) -> Option<&[DeviceTaint]> {
        self.kind.taints.as_deref().map(Vec::as_slice)
    }

    pub(crate) fn attributes(&self) -> Attributes<'_> {
        Attributes {
            common: &self.placement.common,
            own: &self.kind.own,
        }
    }

    /// Best fit: the memory capacity (`memory`, or the first `<domain>/memory` in name order).
    pub(crate) fn memory(&self) -> Quantity {
        self.kind
            .capacity
            .0
            .iter()
            .find(|(name, _, _)| &**name == "memory" || name.ends_with("/memory"))
            .map_or(Quantity::ZERO, |(_, value, _)| *value)
    }

    /// The PCI address best fit orders by (`pciAddress` or the standard `pciBusID`, the first in
    /// name order).
    pub(crate) fn pci_address(&self) -> &str {
        [
            "gpu.deckhouse.io/pciAddress",
            "pciAddress",
            "resource.kubernetes.io/pciBusID",
        ]
        .iter()
        .find_map(|name| self.attributes().get(name).and_then(AttrValue::as_str))
        .unwrap_or_default()
    }
}
