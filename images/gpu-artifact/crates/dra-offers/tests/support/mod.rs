//! Cards as the handler sees them: real `GpuInventory` read through the NVIDIA backend from the mock
//! libnvidia-ml with a machine description of `testing/mock-nvml/machines`, and helpers that read
//! counters back out of published slices.

#![allow(dead_code)] // each test binary uses its own subset

use std::collections::BTreeMap;

use dra_offers::{CardOffering, CounterValues, Layout, OfferPolicy, PoolTarget, Publication, build_publication};
use k8s_openapi::api::resource::v1::{Counter, Device, ResourceSlice};

mod mock_cards;

pub use mock_cards::mock_cards;

pub const NODE: &str = "node-a";
pub const DRIVER: &str = "gpu.deckhouse.io";

/// Every card of the fixture, indexed by sorted PCI address as the node agent does.
pub fn cards(fixture: &str, device_label: &str) -> Vec<CardOffering> {
    mock_cards(fixture, NODE, "xxxx", device_label)
}

/// `count` copies of the fixture's first card at distinct PCI addresses and indices.
pub fn node_of(fixture: &str, count: u32) -> Vec<CardOffering> {
    let card = cards(fixture, "model").remove(0);
    (0..count)
        .map(|index| {
            let mut copy = card.clone();
            copy.index = index;
            copy.physical_gpu = format!("{NODE}-{index}-10de-xxxx");
            copy.inventory.pci_address = format!("0000:{:02x}:00.0", 0x18 + index).parse().unwrap();
            copy.inventory.uuid = format!("GPU-{index}");
            copy
        })
        .collect()
}

pub fn target() -> PoolTarget {
    PoolTarget {
        node_name: NODE.into(),
        driver: DRIVER.into(),
    }
}

pub fn publish(cards: &[CardOffering], policy: OfferPolicy, layout: Layout) -> Publication {
    build_publication(&target(), cards, policy, layout).expect("the node's offers can be published")
}

/// MIG and counters, exclusive cards only (the default of a node without sharing labels).
pub const ALL: OfferPolicy = OfferPolicy {
    mig_allowed: true,
    time_slicing_allowed: false,
    mps_allowed: false,
    counters: true,
    sharing: true,
    taints: true,
    none_effect: true,
};

/// Everything at once: MIG and both sharing strategies.
pub const SHARED: OfferPolicy = OfferPolicy {
    time_slicing_allowed: true,
    mps_allowed: true,
    ..ALL
};

pub fn devices(publication: &Publication) -> Vec<&Device> {
    publication
        .slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .collect()
}

pub fn device<'a>(publication: &'a Publication, name: &str) -> &'a Device {
    devices(publication)
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("device {name} is published"))
}

/// Counter set name -> its counters, over the whole pool.
pub fn counter_sets(slices: &[ResourceSlice]) -> BTreeMap<String, CounterValues> {
    slices
        .iter()
        .flat_map(|s| s.spec.shared_counters.iter().flatten())
        .map(|set| (set.name.clone(), values(&set.counters)))
        .collect()
}

/// What `device` consumes from its one counter set.
pub fn consumption(device: &Device) -> (String, CounterValues) {
    let consumptions = device.consumes_counters.as_ref().expect("the device consumes counters");
    assert_eq!(consumptions.len(), 1, "{}: one counter set", device.name);
    (consumptions[0].counter_set.clone(), values(&consumptions[0].counters))
}

fn values(counters: &BTreeMap<String, Counter>) -> CounterValues {
    counters
        .iter()
        .map(|(name, counter)| (name.clone(), counter.value.0.parse().expect("an integer quantity")))
        .collect()
}
