//! One card turned into its offers: the whole card, the whole card once more per enabled sharing
//! strategy, and, where MIG is allowed, every placement of every profile; each with its attributes,
//! capacities and counter consumption, and the catalog entry that tells the node what the name
//! means. Every whole-card offer consumes all of the card's counters, so the exclusive offer, each
//! strategy's shared offer and the MIG offers exclude one another; the shares of one shared offer
//! do not, because the scheduler charges a multi-allocatable device's counters once.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{Counter, CounterSet, Device, DeviceCounterConsumption};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use gpu_api::opaque_config::SharingStrategy;

use crate::attributes::{mig_attributes, mig_capacity, physical_attributes, physical_capacity, shared_capacity};
use crate::card::{CardOffering, OfferPolicy};
use crate::catalog::OfferedDevice;
use crate::counters::{CounterValues, card_counters, mig_consumption};
use crate::names::{counter_set_name, mig_device_name, physical_device_name, shared_device_name};

/// A published device and what it means on the node.
#[derive(Debug, Clone)]
pub struct Offer {
    pub device: Device,
    pub offered: OfferedDevice,
}

/// Everything one card contributes to the pool.
#[derive(Debug, Clone)]
pub struct CardOffers {
    /// `None` when counters are not published (the fallback).
    pub counter_set: Option<CounterSet>,
    pub offers: Vec<Offer>,
}

/// The card's offers under `policy`.
pub fn card_offers(card: &CardOffering, policy: OfferPolicy) -> CardOffers {
    let inventory = &card.inventory;
    let set_name = counter_set_name(&inventory.pci_address);
    let consumes = |values: &CounterValues| {
        policy.counters.then(|| {
            vec![DeviceCounterConsumption {
                counter_set: set_name.clone(),
                counters: counters(values),
            }]
        })
    };
    let whole_card = card_counters(inventory);
    let taints = policy.taints_of(card);
    let mut offers = vec![Offer {
        device: Device {
            name: physical_device_name(card.index),
            attributes: Some(physical_attributes(card, SharingStrategy::Exclusive)),
            capacity: Some(physical_capacity(card)),
            consumes_counters: consumes(&whole_card),
            taints: taints.clone(),
            ..Device::default()
        },
        offered: OfferedDevice::Physical {
            pci_address: inventory.pci_address,
            uuid: inventory.uuid.clone(),
            physical_gpu: card.physical_gpu.clone(),
        },
    }];
    for strategy in policy.shared_strategies() {
        offers.push(Offer {
            device: Device {
                name: shared_device_name(card.index, strategy),
                attributes: Some(physical_attributes(card, strategy)),
                capacity: Some(shared_capacity(card)),
                consumes_counters: consumes(&whole_card),
                allow_multiple_allocations: Some(true),
                taints: taints.clone(),
                ..Device::default()
            },
            offered: OfferedDevice::SharedPhysical {
                pci_address: inventory.pci_address,
                uuid: inventory.uuid.clone(),
                physical_gpu: card.physical_gpu.clone(),
                strategy,
            },
        });
    }
    let mig = inventory.mig.as_ref().filter(|_| policy.offers_mig());
    for profile in mig.iter().flat_map(|mig| &mig.profiles) {
        for placement in &profile.placements {
            offers.push(Offer {
                device: Device {
                    name: mig_device_name(card.index, &profile.name, *placement),
                    attributes: Some(mig_attributes(card, profile)),
                    capacity: Some(mig_capacity(profile)),
                    consumes_counters: consumes(&mig_consumption(profile, *placement)),
                    taints: taints.clone(),
                    ..Device::default()
                },
                offered: OfferedDevice::Mig {
                    pci_address: inventory.pci_address,
                    parent_uuid: inventory.uuid.clone(),
                    physical_gpu: card.physical_gpu.clone(),
                    profile_id: profile.id,
                    profile_name: profile.name.clone(),
                    placement: *placement,
                },
            });
        }
    }
    CardOffers {
        counter_set: policy.counters.then(|| CounterSet {
            name: set_name.clone(),
            counters: counters(&whole_card),
        }),
        offers,
    }
}

fn counters(values: &CounterValues) -> BTreeMap<String, Counter> {
    values
        .iter()
        .map(|(name, value)| {
            let counter = Counter {
                value: Quantity(value.to_string()),
            };
            (name.clone(), counter)
        })
        .collect()
}
