//! Shared whole-card offers (TimeSlicing, MPS): named per strategy, multi-allocatable with a
//! `sharePercent` capacity, a `memory` capacity that a share does not use up by default, counters
//! that keep them apart from every other offer of the card, within the API limits on the largest
//! node, and a read-back check that notices a server which dropped the sharing fields.

mod support;

use dra_offers::{
    CounterValues, Layout, OfferPolicy, OfferedDevice, SHARE_PERCENT, card_counters, fit_together, sharing_dropped,
};
use gpu_api::opaque_config::SharingStrategy;
use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, CapacityRequestPolicyRange};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use support::*;

const MIB: u64 = 1024 * 1024;

fn a30(policy: OfferPolicy) -> dra_offers::Publication {
    publish(&cards("a30.yaml", "a30-pcie"), policy, Layout::Combined)
}

fn policy(quantity: (u64, u64, u64, u64)) -> Option<CapacityRequestPolicy> {
    let (default, min, max, step) = quantity;
    let q = |value: u64| Quantity(value.to_string());
    Some(CapacityRequestPolicy {
        default: Some(q(default)),
        valid_range: Some(CapacityRequestPolicyRange {
            min: q(min),
            max: Some(q(max)),
            step: Some(q(step)),
        }),
        valid_values: None,
    })
}

#[test]
fn each_enabled_strategy_adds_one_shared_offer_per_card() {
    let only_mps = a30(OfferPolicy::from_node_labels(Some("false"), None, Some("true")));
    let names: Vec<&str> = devices(&only_mps).iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["gpu0", "gpu0-mps"]);
    let both = a30(SHARED);
    assert!(device(&both, "gpu0-timeslicing").allow_multiple_allocations == Some(true));
    assert_eq!(
        device(&both, "gpu0").allow_multiple_allocations,
        None,
        "the plain offer stays exclusive"
    );
    let card = &cards("a30.yaml", "a30-pcie")[0];
    for (name, strategy) in [
        ("gpu0-mps", SharingStrategy::Mps),
        ("gpu0-timeslicing", SharingStrategy::TimeSlicing),
    ] {
        assert_eq!(
            both.catalog[name],
            OfferedDevice::SharedPhysical {
                pci_address: card.inventory.pci_address,
                uuid: card.inventory.uuid.clone(),
                physical_gpu: card.physical_gpu.clone(),
                strategy,
            }
        );
        let sharing = &device(&both, name).attributes.as_ref().unwrap()["gpu.deckhouse.io/sharing"];
        assert_eq!(sharing.string.as_deref(), Some(strategy.as_str()));
    }
    assert!(matches!(both.catalog["gpu0"], OfferedDevice::Physical { .. }));
}

#[test]
fn a_share_divides_share_percent_and_uses_no_memory_unless_it_asks() {
    let publication = a30(SHARED);
    let capacity = device(&publication, "gpu0-mps").capacity.clone().unwrap();
    assert_eq!(SHARE_PERCENT, "sharePercent");
    let share = &capacity["gpu.deckhouse.io/sharePercent"];
    assert_eq!(share.value.0, "100");
    assert_eq!(share.request_policy, policy((100, 1, 100, 1)));
    let memory = &capacity["gpu.deckhouse.io/memory"];
    let card_memory = 24576 * MIB;
    assert_eq!(memory.value.0, card_memory.to_string());
    assert_eq!(memory.request_policy, policy((0, 0, card_memory, MIB)));
    assert_eq!(capacity.len(), 2);
    // Every exclusive offer has all of sharePercent, as a plain capacity (the 1.34 workaround).
    for name in ["gpu0", "gpu0-mig-1g6gb-3"] {
        let exclusive = device(&publication, name).capacity.clone().unwrap();
        assert_eq!(exclusive["gpu.deckhouse.io/sharePercent"].value.0, "100", "{name}");
        assert!(exclusive.values().all(|c| c.request_policy.is_none()), "{name}");
    }
}

#[test]
fn every_whole_card_offer_excludes_the_others_and_mig() {
    let publication = a30(SHARED);
    let available = card_counters(&cards("a30.yaml", "a30-pcie")[0].inventory);
    let consumed = |name: &str| -> CounterValues { consumption(device(&publication, name)).1 };
    assert_eq!(
        consumed("gpu0-mps"),
        available,
        "a shared offer consumes the whole card"
    );
    assert_eq!(consumed("gpu0-timeslicing"), available);
    let fits = |names: &[&str]| {
        let each: Vec<CounterValues> = names.iter().map(|n| consumed(n)).collect();
        fit_together(&available, &each.iter().collect::<Vec<_>>())
    };
    assert!(fits(&["gpu0-mps"]));
    assert!(!fits(&["gpu0-mps", "gpu0-timeslicing"]));
    assert!(!fits(&["gpu0-mps", "gpu0"]));
    assert!(!fits(&["gpu0-timeslicing", "gpu0-mig-1g6gb-3"]));
}

#[test]
fn eight_h100_sxm5_with_both_strategies_fit_both_layouts() {
    let cards = cards("h100-sxm5-80gb-x8.yaml", "h100-sxm5-80gb");
    let combined = publish(&cards, SHARED, Layout::Combined);
    assert_eq!(combined.slices.len(), 8, "one slice per card");
    for slice in &combined.slices {
        assert_eq!(
            slice.spec.devices.as_ref().unwrap().len(),
            28,
            "26 exclusive + 2 shared"
        );
    }
    let split = publish(&cards, SHARED, Layout::Split);
    let shape: Vec<(usize, usize)> = split
        .slices
        .iter()
        .map(|s| {
            (
                s.spec.shared_counters.iter().flatten().count(),
                s.spec.devices.iter().flatten().count(),
            )
        })
        .collect();
    assert_eq!(shape, [(8, 0), (0, 64), (0, 64), (0, 64), (0, 32)]);
    for publication in [&combined, &split] {
        let layout = if publication.slices.len() == 8 {
            Layout::Combined
        } else {
            Layout::Split
        };
        for slice in &publication.slices {
            dra_offers::check_slice(&slice.spec, layout).unwrap();
        }
        assert_eq!(publication.catalog.len(), 8 * 28);
    }
}

#[test]
fn read_back_tells_when_the_server_dropped_the_sharing_fields() {
    let cards = cards("a30-x2.yaml", "a30-pcie");
    for layout in [Layout::Combined, Layout::Split] {
        let sent = publish(&cards, SHARED, layout).at_generation(2);
        assert_eq!(sharing_dropped(&sent, &sent), None, "all kept");
        let mut stored = sent.clone();
        for device in stored.iter_mut().flat_map(|s| s.spec.devices.iter_mut().flatten()) {
            device.allow_multiple_allocations = None;
            for capacity in device.capacity.iter_mut().flat_map(|c| c.values_mut()) {
                capacity.request_policy = None;
            }
        }
        let reason = sharing_dropped(&sent, &stored).expect("dropped sharing fields are noticed");
        assert_eq!(
            reason,
            "the API server dropped allowMultipleAllocations from 4 of 4 shared devices and requestPolicy \
             from 8 of 8 capacities"
        );
        let fallback = publish(
            &cards,
            OfferPolicy {
                sharing: false,
                ..SHARED
            },
            layout,
        );
        assert!(
            fallback
                .catalog
                .keys()
                .all(|name| !name.ends_with("-mps") && !name.ends_with("-timeslicing"))
        );
        assert!(
            fallback.catalog.contains_key("gpu1-mig-1g6gb-3"),
            "MIG stays: counters were kept"
        );
        let fallback = fallback.at_generation(3);
        assert_eq!(
            sharing_dropped(&fallback, &fallback),
            None,
            "nothing to drop without shares"
        );
    }
}
