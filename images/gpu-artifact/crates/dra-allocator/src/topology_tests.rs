use std::sync::Arc;

use super::*;

/// Eight cards as on an HGX board with two sockets: one NVLink domain (NVSwitch), cards 0-3 under
/// root pci0000:00 on NUMA node 0, cards 4-7 under pci0000:80 on NUMA node 1.
fn hgx() -> Vec<(AttrValue, AttrValue, AttrValue)> {
    (0..8)
        .map(|card| {
            let (root, numa) = if card < 4 { ("pci0000:00", 0) } else { ("pci0000:80", 1) };
            (
                AttrValue::String(Arc::from("0000:18:00.0")),
                AttrValue::String(Arc::from(root)),
                AttrValue::Int(numa),
            )
        })
        .collect()
}

fn places(cards: &[(AttrValue, AttrValue, AttrValue)], nvlink: bool) -> Vec<Place<'_>> {
    cards
        .iter()
        .map(|(domain, root, numa)| Place {
            nvlink: nvlink.then_some(domain),
            root: Some(root),
            numa: Some(numa),
        })
        .collect()
}

#[test]
fn the_spread_counts_domains_roots_and_numa_nodes_beyond_the_first() {
    let cards = hgx();
    let on = places(&cards, true);
    assert_eq!(spread_of(&[on[0], on[1]]), (0, 0, 0), "one NUMA node under one root");
    assert_eq!(spread_of(&[on[3], on[4]]), (0, 1, 1), "two sockets, one NVLink domain");
    assert_eq!(spread_of(&[on[0]]), (0, 0, 0), "one device is never spread");
    let off = places(&cards, false);
    assert_eq!(
        spread_of(&[off[0], off[1], off[2]]),
        (2, 0, 0),
        "cards without NVLink are each a domain of their own"
    );
    assert!(
        spread_of(&[on[3], on[4]]) < spread_of(&[off[0], off[1]]),
        "NVLink comes first"
    );
    assert_eq!(add((0, 1, 1), (2, 0, 0)), (2, 1, 1));
}

#[test]
fn groups_come_closest_first_and_tightest_first_within_a_tier() {
    let cards = hgx();
    let on = places(&cards, true);
    let slots: Vec<u32> = (0..8).collect();
    // Cards 0 and 1 are taken: NUMA node 0 has two free, NUMA node 1 four.
    let free = |slot: u32| slot >= 2;
    let tried = groups(&slots, |s| on[s as usize], free, 2);
    assert_eq!(
        tried,
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
        "the NUMA node with two free first, so NUMA node 1 stays whole; the whole NVLink domain is the unrestricted search"
    );
    assert_eq!(
        groups(&slots, |s| on[s as usize], free, 3),
        vec![vec![4, 5, 6, 7]],
        "a group without room for the request is not tried"
    );
    let off = places(&cards, false);
    assert_eq!(
        groups(&slots, |s| off[s as usize], |_| true, 2),
        vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]],
        "without NVLink: one root and NUMA node; the same devices are not offered again at a looser tier"
    );
}

#[test]
fn devices_without_topology_attributes_form_no_group() {
    let bare = Place {
        nvlink: None,
        root: None,
        numa: None,
    };
    let tried = groups(&[0, 1, 2], |_| bare, |_| true, 2);
    assert!(tried.is_empty(), "{tried:?}");
    assert_eq!(spread_of(&[bare, bare]), (1, 1, 1), "unknown places count as distinct");
}
