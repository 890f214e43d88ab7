use super::*;
use allocator_workloads::{A30, NodeShape, PIN_ATTRIBUTE, Rng, node_slices};

fn slices_of(node: &str) -> Vec<ResourceSlice> {
    let shape = NodeShape {
        cards_min: 2,
        cards_spread: 1,
        models: &[&A30],
        shared_offer_percent: 0,
        mig_offers_percent: 100,
        one_profile_per_size: false,
        taint_percent: 0,
        split_layout: false,
    };
    let mut slices = node_slices(&mut Rng::new(7), node, &shape);
    // As gpu-handler publishes them: without the differential's per-device pinning attribute.
    for slice in &mut slices {
        for device in slice["spec"]["devices"].as_array_mut().into_iter().flatten() {
            device["attributes"].as_object_mut().unwrap().remove(PIN_ATTRIBUTE);
        }
    }
    slices.into_iter().map(|s| serde_json::from_value(s).unwrap()).collect()
}

#[test]
fn an_offer_on_every_card_and_node_is_one_kind_kept_while_held() {
    let mut tables = Tables::default();
    let mut devices = Vec::new();
    for node in ["n1", "n2"] {
        for slice in slices_of(node) {
            devices.extend(parse_slice(&slice, &mut tables).1);
        }
    }
    let named = |name: &str| devices.iter().filter(|d| &**d.name() == name).collect::<Vec<_>>();
    let offers = named("gpu1-mig-1g6gb-0");
    assert_eq!(offers.len(), 2, "one per node");
    assert!(Arc::ptr_eq(&offers[0].kind, &offers[1].kind));
    let (card0, card1) = (named("gpu0-mig-1g6gb-0"), &offers[0]);
    // On another card the offer consumes that card's counter set: a kind of its own, sharing
    // the parts that are alike.
    assert!(!Arc::ptr_eq(&card0[0].kind, &card1.kind));
    assert!(Arc::ptr_eq(&card0[0].kind.own, &card1.kind.own));
    assert!(Arc::ptr_eq(&card0[0].kind.capacity, &card1.kind.capacity));
    assert!(
        !Arc::ptr_eq(&card0[0].placement.common, &card1.placement.common),
        "each card has its own"
    );
    let whole = named("gpu0");
    assert!(!Arc::ptr_eq(&whole[0].kind, &card1.kind));
    assert!(
        Arc::ptr_eq(&whole[0].placement, &card0[0].placement),
        "the devices of one card in one slice share where they are"
    );
    assert!(!Arc::ptr_eq(&whole[0].placement, &whole[1].placement), "one per node");
    assert!(whole[0].kind.memory_slices > card1.kind.memory_slices);
    assert!(card1.kind.is_mig && !whole[0].kind.is_mig);
    drop(devices);
    tables.prune();
    assert_eq!(tables.kinds.len(), 0);
    assert_eq!(tables.attributes.len(), 0);
}
