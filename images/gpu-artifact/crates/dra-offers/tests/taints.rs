//! Health taints on the published devices: every offer of an unhealthy card carries them (MIG
//! placements and shared offers inherit the card's), informational ones only where the server knows
//! the effect `None`, and a server without taints gets the card withheld instead, its devices still
//! known to the node.

mod support;

use dra_offers::{EFFECT_NO_SCHEDULE, EFFECT_NONE, Layout, OfferPolicy, taints_dropped};
use k8s_openapi::api::resource::v1::DeviceTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use support::*;

fn taint(key: &str, value: &str, effect: &str) -> DeviceTaint {
    DeviceTaint {
        key: format!("gpu.deckhouse.io/{key}"),
        value: Some(value.into()),
        effect: effect.into(),
        time_added: Some(Time("2025-01-01T00:00:00Z".parse().unwrap())),
    }
}

fn a30_pair_with_first_unhealthy() -> Vec<dra_offers::CardOffering> {
    let mut cards = node_of("a30.yaml", 2);
    cards[0].taints = vec![
        taint("xid", "79", EFFECT_NO_SCHEDULE),
        taint("row-remap", "pending", EFFECT_NONE),
    ];
    cards
}

#[test]
fn every_offer_of_an_unhealthy_card_carries_its_taints() {
    let cards = a30_pair_with_first_unhealthy();
    for layout in [Layout::Combined, Layout::Split] {
        let publication = publish(&cards, SHARED, layout);
        let (sick, healthy): (Vec<_>, Vec<_>) = devices(&publication)
            .into_iter()
            .partition(|d| d.name.starts_with("gpu0"));
        assert!(
            sick.iter().any(|d| d.name.starts_with("gpu0-mig-")),
            "MIG offers are published"
        );
        for device in &sick {
            assert_eq!(device.taints.as_ref(), Some(&cards[0].taints), "{}", device.name);
        }
        assert!(healthy.iter().all(|d| d.taints.is_none()));
        assert!(publication.withheld.is_empty());
    }
}

#[test]
fn without_the_none_effect_only_the_taints_that_keep_claims_off_are_published() {
    let cards = a30_pair_with_first_unhealthy();
    let policy = OfferPolicy {
        none_effect: false,
        ..ALL
    };
    let publication = publish(&cards, policy, Layout::Combined);
    assert_eq!(
        device(&publication, "gpu0").taints,
        Some(vec![cards[0].taints[0].clone()])
    );
    let mut noted = node_of("a30.yaml", 1);
    noted[0].taints = vec![taint("row-remap", "pending", EFFECT_NONE)];
    let publication = publish(&noted, policy, Layout::Combined);
    assert_eq!(
        device(&publication, "gpu0").taints,
        None,
        "1.34 rejects the effect None"
    );
}

#[test]
fn a_server_without_taints_gets_the_unhealthy_card_withheld() {
    let cards = a30_pair_with_first_unhealthy();
    let policy = OfferPolicy { taints: false, ..ALL };
    for layout in [Layout::Combined, Layout::Split] {
        let publication = publish(&cards, policy, layout);
        let names: Vec<&str> = devices(&publication).iter().map(|d| d.name.as_str()).collect();
        assert!(names.iter().all(|n| n.starts_with("gpu1")), "{names:?}");
        assert!(devices(&publication).iter().all(|d| d.taints.is_none()));
        assert!(publication.withheld.contains_key("gpu0"));
        assert!(
            publication.withheld.contains_key("gpu0-mig-1g6gb-0"),
            "{:?}",
            publication.withheld.keys()
        );
        assert!(!publication.catalog.contains_key("gpu0"));
    }
    let mut informational = node_of("a30.yaml", 1);
    informational[0].taints = vec![taint("row-remap", "pending", EFFECT_NONE)];
    let publication = publish(&informational, policy, Layout::Split);
    assert!(
        publication.catalog.contains_key("gpu0"),
        "a note does not withhold the card"
    );
}

#[test]
fn dropped_taints_are_noticed() {
    let cards = a30_pair_with_first_unhealthy();
    let sent = publish(&cards, ALL, Layout::Split).slices;
    let mut stored = sent.clone();
    assert_eq!(taints_dropped(&sent, &stored), None);
    for slice in &mut stored {
        for device in slice.spec.devices.iter_mut().flatten() {
            device.taints = None;
        }
    }
    let reason = taints_dropped(&sent, &stored).expect("dropped taints are noticed");
    assert!(reason.starts_with("the API server dropped the taints of "), "{reason}");
}
