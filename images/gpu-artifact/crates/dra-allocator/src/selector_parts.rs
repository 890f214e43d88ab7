//! What a selector's answer for a device depends on, as keys its answers are remembered by
//! (see `candidates`): the values of the device parts it reads (`parts_of`), or, cheaper, the
//! device's kind (`kind_key`) when it reads nothing of the card's common attributes: a kind is one
//! offer of one card position, shared by every node of a model, so one answer serves all of them.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use dra_cel::{DeviceReference, Quantity};

use crate::device::{AttrList, AttrValue, Kind};
use crate::inventory::Inventory;

/// The value of one part of a device a selector reads, as the selector sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Part {
    Driver(Arc<str>),
    Shared(bool),
    /// The qualified attribute, the bare one (when the domain is the driver's), whether the
    /// domain exists at all.
    Attribute(Option<AttrValue>, Option<AttrValue>, bool),
    Capacity(Option<Quantity>, Option<Quantity>, bool),
}

const WELL_KNOWN_DOMAINS: [&str; 2] = ["resource.kubernetes.io", "gpu.deckhouse.io"];

pub(crate) fn parts_of(inventory: &Inventory, slot: u32, references: &[DeviceReference]) -> Vec<Part> {
    let device = inventory.device(slot);
    let driver = &inventory.pool(device.pool).driver;
    let known = |domain: &str| known(domain, driver);
    references
        .iter()
        .map(|reference| match reference {
            DeviceReference::Driver => Part::Driver(driver.clone()),
            DeviceReference::AllowMultipleAllocations => Part::Shared(device.raw.kind.shared),
            DeviceReference::Attribute { domain, name } => {
                let attributes = device.raw.attributes();
                let qualified = attributes.get_qualified(domain, name).cloned();
                let bare = (domain == &**driver).then(|| attributes.get(name).cloned()).flatten();
                Part::Attribute(qualified, bare, known(domain) || attributes.has_domain(domain))
            }
            DeviceReference::Capacity { domain, name } => {
                let capacity = &device.raw.kind.capacity;
                let qualified = capacity.get_qualified(domain, name);
                let bare = (domain == &**driver).then(|| capacity.get(name)).flatten();
                Part::Capacity(qualified, bare, known(domain) || capacity.has_domain(domain))
            }
        })
        .collect()
}

/// A device's kind, compared and hashed by address, and its driver (each pool holds its own
/// copy of the name, so compared by value). It holds the kind, so its address cannot be reused
/// by another kind while the answer is remembered.
pub(crate) struct KindKey {
    kind: Arc<Kind>,
    driver: Arc<str>,
}

impl PartialEq for KindKey {
    fn eq(&self, other: &KindKey) -> bool {
        Arc::ptr_eq(&self.kind, &other.kind) && self.driver == other.driver
    }
}

impl Eq for KindKey {}

impl Hash for KindKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(Arc::as_ptr(&self.kind) as usize);
        self.driver.hash(state);
    }
}

/// Whether a selector reads the common attributes of the card it saw last (by address, valid
/// for one pass over the devices of a scope, while the inventory cannot change): a card's
/// devices come one after another, so this is worked out once per card.
#[derive(Default)]
pub(crate) struct CommonSeen(Option<(*const AttrList, bool)>);

/// The kind key of the device in `slot` for a selector that reads `references`, unless the
/// selector reads something of the device's card's common attributes: an attribute found there
/// (qualified, or bare in the driver's domain), or whether a domain not known beforehand exists.
pub(crate) fn kind_key(
    inventory: &Inventory,
    slot: u32,
    references: &[DeviceReference],
    seen: &mut CommonSeen,
) -> Option<KindKey> {
    let device = inventory.device(slot);
    let driver = &inventory.pool(device.pool).driver;
    let common: &AttrList = &device.raw.placement.common;
    let reads_common = match seen.0 {
        Some((address, reads)) if std::ptr::eq(address, common) => reads,
        _ => {
            let reads = references.iter().any(|reference| match reference {
                DeviceReference::Attribute { domain, name } => {
                    common.get_qualified(domain, name).is_some()
                        || (domain == &**driver && common.get(name).is_some())
                        || (!known(domain, driver) && common.has_domain(domain))
                }
                _ => false,
            });
            seen.0 = Some((common, reads));
            reads
        }
    };
    (!reads_common).then(|| KindKey {
        kind: device.raw.kind.clone(),
        driver: driver.clone(),
    })
}

fn known(domain: &str, driver: &str) -> bool {
    WELL_KNOWN_DOMAINS.contains(&domain) || domain == driver
}
