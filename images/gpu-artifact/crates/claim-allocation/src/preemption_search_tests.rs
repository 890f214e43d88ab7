use super::*;
use std::collections::HashMap;
use std::convert::Infallible;

use dra_allocator::Allocator;
use k8s_openapi::api::core::v1::Node;

use crate::test_objects::{claim, device_classes, slices};

fn holder(uid: &str, priority: i32, started_minute: i64) -> Holder {
    Holder {
        pod: format!("ns/{uid}"),
        uid: uid.to_owned(),
        priority,
        started: Some(Timestamp::from_second(1_800_000_000 + started_minute * 60).unwrap()),
        evictable: true,
    }
}

/// A node whose cards each hold the claims of `cards[i]` (one claim per Pod, named as the Pod),
/// and a `fits` that says yes once every claim of some card is released: a Pod that needs a
/// whole card.
fn node(name: &str, cards: &[&[(&str, i32)]]) -> (NodeHolders, Vec<Vec<String>>) {
    let mut holders = vec![];
    let mut claims = vec![];
    let mut by_card = vec![];
    for (card, pods) in cards.iter().enumerate() {
        let mut ids = vec![];
        for (minute, (uid, priority)) in pods.iter().enumerate() {
            holders.push(holder(uid, *priority, (card * 10 + minute) as i64));
            claims.push(HeldClaim {
                id: format!("claim-{uid}"),
                reservers: vec![uid.to_string()],
            });
            ids.push(format!("claim-{uid}"));
        }
        by_card.push(ids);
    }
    let holders = NodeHolders {
        node: name.to_owned(),
        holders,
        claims,
    };
    (holders, by_card)
}

fn whole_card(cards: &[Vec<String>], released: &[&str]) -> bool {
    cards
        .iter()
        .any(|card| card.iter().all(|c| released.contains(&c.as_str())))
}

fn uids(candidate: &Candidate) -> Vec<&str> {
    candidate.victims.iter().map(|v| v.uid.as_str()).collect()
}

/// The victims a priority-1000 Pod that needs one whole card finds on `holders`' node, by uid.
fn whole_card_victims(holders: &NodeHolders, cards: &[Vec<String>]) -> Option<Vec<String>> {
    let mut fits = |released: &[&str]| Ok::<_, Infallible>(whole_card(cards, released));
    let found = victims_on_node(1000, holders, &mut fits).unwrap()?;
    Some(uids(&found).into_iter().map(str::to_owned).collect())
}

#[test]
fn the_cheapest_card_is_emptied_and_nothing_more() {
    let (holders, cards) = node("n1", &[&[("a", 0), ("b", 5)], &[("c", 0), ("d", 0)], &[("e", 0)]]);
    assert_eq!(
        whole_card_victims(&holders, &cards).expect("a candidate"),
        ["e"],
        "one Pod of priority 0 frees a card: the Pods of the other cards are reprieved"
    );
}

#[test]
fn pods_of_equal_or_higher_priority_are_never_victims() {
    let (holders, cards) = node("n1", &[&[("a", 1000)], &[("b", 2000)]]);
    assert_eq!(whole_card_victims(&holders, &cards), None);
    let (holders, cards) = node("n1", &[&[("a", 0), ("b", 1000)]]);
    assert_eq!(
        whole_card_victims(&holders, &cards),
        None,
        "the card is shared with a Pod of equal priority: evicting the other frees nothing whole"
    );
}

#[test]
fn a_claim_shared_with_a_pod_that_stays_frees_nothing() {
    let (mut holders, cards) = node("n1", &[&[("a", 0)], &[("b", 0)]]);
    holders.holders.push(holder("keeper", 5000, 0));
    holders.claims[0].reservers.push("keeper".to_owned());
    assert_eq!(
        whole_card_victims(&holders, &cards).expect("a candidate"),
        ["b"],
        "a's claim is also reserved by a Pod of priority 5000"
    );
}

#[test]
fn a_pod_the_budget_protects_is_passed_over() {
    let (mut holders, cards) = node("n1", &[&[("a", 0)], &[("b", 0), ("c", 0)]]);
    holders.holders[0].evictable = false;
    assert_eq!(
        whole_card_victims(&holders, &cards).expect("a candidate"),
        ["b", "c"],
        "the other card, although it takes two Pods"
    );
    holders.holders[1].evictable = false;
    assert_eq!(whole_card_victims(&holders, &cards), None, "then it waits");
}

#[test]
fn nodes_are_ranked_as_upstream_ranks_them() {
    let (low, low_cards) = node("n-low", &[&[("a", 10), ("b", 10)]]);
    let (high, high_cards) = node("n-high", &[&[("c", 500)]]);
    let (few, few_cards) = node("n-few", &[&[("d", 10)]]);
    let cards: HashMap<&str, Vec<Vec<String>>> =
        HashMap::from([("n-low", low_cards), ("n-high", high_cards), ("n-few", few_cards)]);
    let mut fits = |node: &str, released: &[&str]| Ok::<_, Infallible>(whole_card(&cards[node], released));
    let found = choose_victims(1000, &[low.clone(), high.clone(), few.clone()], &mut fits)
        .unwrap()
        .expect("a node");
    assert_eq!(
        (found.node.as_str(), uids(&found)),
        ("n-few", vec!["d"]),
        "same highest priority: the lower sum"
    );
    let found = choose_victims(1000, &[low, high], &mut fits).unwrap().expect("a node");
    assert_eq!(
        found.node, "n-low",
        "two Pods of priority 10 before one of priority 500: the highest victim priority first"
    );
}

/// The engine answers: a node of two A30s full of one-slice MIG claims (four per card), and a
/// Pod that needs a whole card. Exactly the four claims of one card go, and the engine is left
/// as it was.
#[test]
fn the_engine_frees_exactly_one_card_of_mig_pods() {
    let classes = device_classes();
    let mut engine = Allocator::new(&slices("n1", 2), &classes, &[]);
    let node_object = Node {
        metadata: kube::core::ObjectMeta {
            name: Some("n1".to_owned()),
            ..Default::default()
        },
        ..Node::default()
    };
    let mut holders = NodeHolders {
        node: "n1".to_owned(),
        ..NodeHolders::default()
    };
    let mut card_of = HashMap::new();
    for i in 0..8 {
        let mig = claim(&format!("mig-{i}"), "gpu-mig", 1, 1);
        let allocation = engine
            .allocate(&mig, Some(&node_object))
            .unwrap()
            .expect("room for 8 MIG slices");
        let device = allocation.devices.as_ref().unwrap().results.as_ref().unwrap()[0]
            .device
            .clone();
        card_of.insert(format!("pod-{i}"), device.split('-').next().unwrap().to_owned());
        engine.commit_claim(&mig, Some(&allocation));
        holders.holders.push(holder(&format!("pod-{i}"), 0, i));
        holders.claims.push(HeldClaim {
            id: format!("mig-{i}"),
            reservers: vec![format!("pod-{i}")],
        });
    }
    let whole = claim("trainer", "gpu-physical", 1, 1);
    assert_eq!(
        engine.allocate(&whole, Some(&node_object)).unwrap(),
        None,
        "the node is full"
    );
    let mut fits = |released: &[&str]| engine.fits_if_released(&[&whole], &node_object, released);
    let found = victims_on_node(1000, &holders, &mut fits)
        .unwrap()
        .expect("a candidate");
    let cards: BTreeSet<&str> = found.victims.iter().map(|v| card_of[&v.uid].as_str()).collect();
    assert_eq!(
        (found.victims.len(), cards.len()),
        (4, 1),
        "the four Pods of one card: {found:?}"
    );
    assert_eq!(
        engine.allocate(&whole, Some(&node_object)).unwrap(),
        None,
        "probing released nothing for real"
    );
    assert!(engine.audit_held().is_empty());
}

#[test]
fn enough_candidates_is_upstreams_share_of_the_nodes() {
    assert_eq!(enough_candidates(3), 3, "every node of a small cluster");
    assert_eq!(enough_candidates(500), 100, "at least 100");
    assert_eq!(enough_candidates(2000), 200, "10% of a large one");
}

#[test]
fn the_search_stops_once_enough_nodes_are_candidates() {
    let mut nodes = vec![];
    let mut cards = HashMap::new();
    for i in 0..150 {
        let name = format!("n{i:03}");
        // The last node has the cheapest victim, but the first 100 are enough.
        let priority = if i == 149 { 1 } else { 500 };
        let uid = format!("p{i}");
        let (holders, by_card) = node(&name, &[&[(uid.as_str(), priority)]]);
        nodes.push(holders);
        cards.insert(name, by_card);
    }
    let mut weighed = 0;
    let mut fits = |node: &str, released: &[&str]| {
        weighed += 1;
        Ok::<_, Infallible>(whole_card(&cards[node], released))
    };
    let found = choose_victims(1000, &nodes, &mut fits).unwrap().expect("a node");
    assert_eq!(found.node, "n000");
    assert!(
        weighed <= 200,
        "{weighed} searches for 100 candidates of one victim each"
    );
}
