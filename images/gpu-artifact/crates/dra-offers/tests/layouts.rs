//! Whole nodes laid out for both API layouts: the largest node we support (8 cards of the largest
//! MIG table) stays within every limit, the fallback carries no counters, and the read-back check
//! notices a server that dropped them.

mod support;

use std::collections::BTreeSet;

use dra_offers::{Layout, OfferPolicy, check_slice, counters_dropped, is_dns_label, pool_name};
use support::*;

const FIXTURES: [&str; 5] = [
    "a30.yaml",
    "a100-sxm4-40gb.yaml",
    "a100-sxm4-80gb.yaml",
    "h100-sxm5-80gb.yaml",
    "h100-pcie.yaml",
];

/// Every slice passes the limits of its layout, the pool is consistent (one generation, the right
/// count, unique device and counter set names) and the catalog names exactly the devices.
fn assert_valid_pool(publication: &dra_offers::Publication, layout: Layout) {
    let count = publication.slices.len() as i64;
    let mut names = BTreeSet::new();
    let mut sets = BTreeSet::new();
    for slice in &publication.slices {
        let name = slice.metadata.name.as_deref().unwrap();
        check_slice(&slice.spec, layout).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(slice.spec.pool.name, pool_name(NODE));
        assert_eq!(slice.spec.pool.resource_slice_count, count, "{name}");
        assert_eq!(slice.spec.node_name.as_deref(), Some(NODE));
        assert_eq!(slice.spec.driver, DRIVER);
        let devices: Vec<&str> = slice.spec.devices.iter().flatten().map(|d| d.name.as_str()).collect();
        assert!(devices.is_sorted(), "{name}: devices in name order");
        for device in devices {
            assert!(names.insert(device.to_owned()), "{device} is published twice");
        }
        for set in slice.spec.shared_counters.iter().flatten() {
            assert!(is_dns_label(&set.name));
            assert!(
                sets.insert(set.name.clone()),
                "counter set {} twice in the pool",
                set.name
            );
        }
    }
    assert_eq!(publication.catalog.keys().cloned().collect::<BTreeSet<_>>(), names);
}

#[test]
fn h100_sxm5_has_the_largest_mig_table_we_support() {
    let offers = |fixture: &str| devices(&publish(&node_of(fixture, 1), ALL, Layout::Split)).len();
    let largest = FIXTURES.iter().map(|f| offers(f)).max().unwrap();
    assert_eq!(offers("h100-sxm5-80gb.yaml"), largest);
    assert_eq!(largest, 1 + 25, "the whole card and 25 placements");
}

#[test]
fn eight_h100_sxm5_fit_the_1_34_layout_one_slice_per_card() {
    let cards = cards("h100-sxm5-80gb-x8.yaml", "h100-sxm5-80gb");
    assert_eq!(cards.len(), 8);
    let publication = publish(&cards, ALL, Layout::Combined);
    assert_valid_pool(&publication, Layout::Combined);
    assert_eq!(publication.slices.len(), 8);
    for slice in &publication.slices {
        let sets = slice.spec.shared_counters.as_deref().unwrap();
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].counters.len(), 15, "memory, 8 memory slices, 6 engines");
        let devices = slice.spec.devices.as_deref().unwrap();
        assert_eq!(devices.len(), 26);
        assert!(
            devices
                .iter()
                .all(|d| d.consumes_counters.as_ref().unwrap()[0].counter_set == sets[0].name)
        );
    }
    assert_eq!(publication.catalog.len(), 8 * 26);
}

#[test]
fn eight_h100_sxm5_fit_the_1_35_layout_with_separate_counter_and_device_slices() {
    let cards = cards("h100-sxm5-80gb-x8.yaml", "h100-sxm5-80gb");
    let publication = publish(&cards, ALL, Layout::Split);
    assert_valid_pool(&publication, Layout::Split);
    let shape: Vec<(usize, usize)> = publication
        .slices
        .iter()
        .map(|s| {
            (
                s.spec.shared_counters.iter().flatten().count(),
                s.spec.devices.iter().flatten().count(),
            )
        })
        .collect();
    assert_eq!(shape, [(8, 0), (0, 64), (0, 64), (0, 64), (0, 16)]);
}

#[test]
fn eight_cards_of_every_supported_model_fit_both_layouts() {
    for fixture in FIXTURES {
        for layout in [Layout::Combined, Layout::Split] {
            let publication = publish(&node_of(fixture, 8), ALL, layout);
            assert_valid_pool(&publication, layout);
        }
    }
}

#[test]
fn more_than_eight_cards_take_more_counter_slices() {
    let publication = publish(&node_of("a30.yaml", 10), ALL, Layout::Split);
    assert_valid_pool(&publication, Layout::Split);
    let sets: Vec<usize> = publication
        .slices
        .iter()
        .map(|s| s.spec.shared_counters.iter().flatten().count())
        .collect();
    assert_eq!(&sets[..2], [8, 2]);
}

#[test]
fn the_fallback_offers_whole_cards_without_any_counter_field() {
    let policy = OfferPolicy {
        counters: false,
        ..SHARED
    };
    for layout in [Layout::Combined, Layout::Split] {
        let publication = publish(&cards("h100-sxm5-80gb-x8.yaml", "h100"), policy, layout);
        assert_valid_pool(&publication, layout);
        assert_eq!(publication.slices.len(), 1);
        let slice = &publication.slices[0];
        assert_eq!(slice.spec.shared_counters, None);
        let names: Vec<&str> = slice.spec.devices.iter().flatten().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["gpu0", "gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7"]);
        assert!(
            slice
                .spec
                .devices
                .iter()
                .flatten()
                .all(|d| d.consumes_counters.is_none())
        );
    }
}

#[test]
fn allow_mig_false_keeps_whole_cards_and_their_counters() {
    let policy = OfferPolicy::from_node_labels(Some("false"), None, None);
    let publication = publish(&cards("a30.yaml", "a30-pcie"), policy, Layout::Combined);
    assert_valid_pool(&publication, Layout::Combined);
    let names: Vec<&str> = devices(&publication).iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["gpu0"]);
    assert!(devices(&publication)[0].consumes_counters.is_some());
}

#[test]
fn no_cards_publish_no_slices() {
    let publication = publish(&[], ALL, Layout::Split);
    assert!(publication.slices.is_empty() && publication.catalog.is_empty());
}

#[test]
fn read_back_tells_when_the_server_dropped_counters() {
    // Two A30s: one counter slice per card on 1.34, one counter slice for both on 1.35+.
    for (layout, counter_slices) in [(Layout::Combined, 2), (Layout::Split, 1)] {
        let sent = publish(&cards("a30-x2.yaml", "a30-pcie"), ALL, layout).at_generation(3);
        assert_eq!(counters_dropped(&sent, &sent), None, "all kept");
        let mut stored = sent.clone();
        for slice in &mut stored {
            slice.spec.shared_counters = None;
            for device in slice.spec.devices.iter_mut().flatten() {
                device.consumes_counters = None;
            }
        }
        let reason = counters_dropped(&sent, &stored).expect("dropped counters are noticed");
        let sets = format!("sharedCounters from {counter_slices} of {counter_slices} ResourceSlices");
        assert!(reason.contains(&sets), "{reason}");
        assert!(reason.contains("consumesCounters from 28 of 28 devices"), "{reason}");
        let fallback = publish(
            &cards("a30-x2.yaml", "a30-pcie"),
            OfferPolicy { counters: false, ..ALL },
            layout,
        )
        .at_generation(4);
        assert_eq!(
            counters_dropped(&fallback, &fallback),
            None,
            "nothing to drop without counters"
        );
    }
}
