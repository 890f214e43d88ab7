//! The node's offers laid out into the ResourceSlices of one pool, in the layout the API server
//! needs: on 1.34 a card's counter set must sit in the same slice as the devices that consume it
//! (one slice per card); from 1.35 counter sets and devices must sit in separate slices of the pool.

use std::collections::btree_map::Entry;

use k8s_openapi::api::resource::v1::{Device, ResourcePool, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::card::{CardOffering, OfferPolicy};
use crate::catalog::DeviceCatalog;
use crate::holdings::{CardHoldings, withheld};
use crate::limits::{MAX_COUNTER_SETS, MAX_DEVICES, MAX_DEVICES_WITH_COUNTERS, check_slice};
use crate::names::{pool_name, slice_name};
use crate::offers::{CardOffers, card_offers};

/// Where counter sets may live, which depends on the API server's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// 1.34: each card's counter set in the same slice as its devices.
    Combined,
    /// 1.35+: counter sets in slices of their own, devices in others; both in one pool.
    Split,
}

impl Layout {
    /// The layout the server of version `major.minor` accepts.
    pub fn for_server(major: u32, minor: u32) -> Self {
        if major > 1 || minor >= 35 {
            Layout::Split
        } else {
            Layout::Combined
        }
    }
}

/// The pool a node publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolTarget {
    pub node_name: String,
    /// The DRA driver, `gpu.deckhouse.io`.
    pub driver: String,
}

/// What to publish: the slices (pool generation 0; the publisher sets the real one) and what each
/// device name means on the node.
#[derive(Debug, Clone)]
pub struct Publication {
    pub slices: Vec<ResourceSlice>,
    pub catalog: DeviceCatalog,
    /// The devices of cards withheld because the server cannot carry the taints that keep claims
    /// off them ([`OfferPolicy::publishes`]): not in any slice, but claims prepared before may use them.
    pub withheld: DeviceCatalog,
}

impl Publication {
    /// The slices with `pool.generation` set.
    pub fn at_generation(&self, generation: i64) -> Vec<ResourceSlice> {
        let mut slices = self.slices.clone();
        for slice in &mut slices {
            slice.spec.pool.generation = generation;
        }
        slices
    }
}

/// Why the node's offers cannot be published.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicationError {
    #[error("device {device} is offered by two cards ({first} and {second})")]
    DuplicateDevice {
        device: String,
        first: String,
        second: String,
    },
    #[error("ResourceSlice {slice} would be refused by the API server: {reason}")]
    Limit { slice: String, reason: String },
}

/// Lays out `cards` under `policy` for a server that needs `layout`.
pub fn build_publication(
    target: &PoolTarget,
    cards: &[CardOffering],
    policy: OfferPolicy,
    layout: Layout,
) -> Result<Publication, PublicationError> {
    build_publication_holding(target, cards, policy, layout, &CardHoldings::new())
}

/// [`build_publication`] for cards held as `holdings` say: the offers a held card cannot give
/// ([`withheld`]) stay out of the slices but stay in the catalog.
pub fn build_publication_holding(
    target: &PoolTarget,
    cards: &[CardOffering],
    policy: OfferPolicy,
    layout: Layout,
    holdings: &CardHoldings,
) -> Result<Publication, PublicationError> {
    let mut cards: Vec<&CardOffering> = cards.iter().collect();
    cards.sort_by_key(|card| card.index);
    let (cards, withheld_cards): (Vec<&CardOffering>, Vec<&CardOffering>) =
        cards.into_iter().partition(|card| policy.publishes(card));
    let mut per_card: Vec<CardOffers> = cards.iter().map(|card| card_offers(card, policy)).collect();
    let unpublished: DeviceCatalog = withheld_cards
        .iter()
        .flat_map(|card| card_offers(card, policy).offers)
        .map(|offer| (offer.device.name, offer.offered))
        .collect();

    let mut catalog = DeviceCatalog::new();
    for offer in per_card.iter().flat_map(|c| &c.offers) {
        match catalog.entry(offer.device.name.clone()) {
            Entry::Vacant(entry) => {
                entry.insert(offer.offered.clone());
            }
            Entry::Occupied(entry) => {
                return Err(PublicationError::DuplicateDevice {
                    device: offer.device.name.clone(),
                    first: entry.get().pci_address().to_string(),
                    second: offer.offered.pci_address().to_string(),
                });
            }
        }
    }

    for card in &mut per_card {
        card.offers.retain(|offer| !withheld(&offer.offered, holdings));
    }

    let specs = match (layout, policy.counters) {
        (Layout::Combined, true) => per_card
            .into_iter()
            .map(|card| SliceContent {
                counter_sets: card.counter_set.into_iter().collect(),
                devices: sorted(card.offers.into_iter().map(|o| o.device).collect()),
            })
            .collect(),
        (Layout::Split, true) => {
            let sets: Vec<_> = per_card.iter().filter_map(|c| c.counter_set.clone()).collect();
            let devices = sorted(per_card.into_iter().flat_map(|c| c.offers).map(|o| o.device).collect());
            let counter_slices = sets.chunks(MAX_COUNTER_SETS).map(|chunk| SliceContent {
                counter_sets: chunk.to_vec(),
                devices: Vec::new(),
            });
            let device_slices = devices.chunks(MAX_DEVICES_WITH_COUNTERS).map(|chunk| SliceContent {
                counter_sets: Vec::new(),
                devices: chunk.to_vec(),
            });
            counter_slices.chain(device_slices).collect()
        }
        (_, false) => {
            let devices: Vec<Device> = sorted(per_card.into_iter().flat_map(|c| c.offers).map(|o| o.device).collect());
            let tainted = devices.iter().any(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()));
            let per_slice = if layout == Layout::Split && tainted {
                MAX_DEVICES_WITH_COUNTERS
            } else {
                MAX_DEVICES
            };
            devices
                .chunks(per_slice)
                .map(|chunk| SliceContent {
                    counter_sets: Vec::new(),
                    devices: chunk.to_vec(),
                })
                .collect::<Vec<_>>()
        }
    };

    let count = specs.len() as i64;
    let slices = specs
        .into_iter()
        .enumerate()
        .map(|(k, content)| {
            let name = slice_name(&target.node_name, &target.driver, k);
            let spec = content.into_spec(target, count);
            check_slice(&spec, layout).map_err(|reason| PublicationError::Limit {
                slice: name.clone(),
                reason,
            })?;
            Ok(ResourceSlice {
                metadata: ObjectMeta {
                    name: Some(name),
                    ..ObjectMeta::default()
                },
                spec,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Publication {
        slices,
        catalog,
        withheld: unpublished,
    })
}

struct SliceContent {
    counter_sets: Vec<k8s_openapi::api::resource::v1::CounterSet>,
    devices: Vec<Device>,
}

impl SliceContent {
    fn into_spec(self, target: &PoolTarget, count: i64) -> ResourceSliceSpec {
        ResourceSliceSpec {
            driver: target.driver.clone(),
            node_name: Some(target.node_name.clone()),
            pool: ResourcePool {
                name: pool_name(&target.node_name),
                generation: 0,
                resource_slice_count: count,
            },
            devices: (!self.devices.is_empty()).then_some(self.devices),
            shared_counters: (!self.counter_sets.is_empty()).then_some(self.counter_sets),
            ..ResourceSliceSpec::default()
        }
    }
}

/// The scheduler tries devices in slice order and takes the first that fits; a stable, sorted
/// order keeps publication deterministic and diffs small.
fn sorted(mut devices: Vec<Device>) -> Vec<Device> {
    devices.sort_by(|a, b| a.name.cmp(&b.name));
    devices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_from_1_35() {
        assert_eq!(Layout::for_server(1, 34), Layout::Combined);
        assert_eq!(Layout::for_server(1, 35), Layout::Split);
        assert_eq!(Layout::for_server(1, 37), Layout::Split);
        assert_eq!(Layout::for_server(2, 0), Layout::Split);
    }
}
