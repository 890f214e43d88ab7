//! Xid delivery through the event set, classified by the Xid policy.

mod support;

use std::time::Duration;

use gpu_vendor::{HealthEventKind, VendorBackend};
use nvidia_backend::XidPolicy;
use support::MockNode;

const WAIT: Duration = Duration::from_secs(2);

#[test]
fn injected_xids_arrive_classified_and_attributed() {
    let node = MockNode::from_fixture("h100-sxm5-80gb-x8.yaml");
    let backend = node.backend();
    let watched = [node.pci(2), node.pci(5)];
    let mut monitor = backend.health_monitor(&watched).unwrap();
    assert_eq!(
        monitor.next_event(Duration::from_millis(50)).unwrap(),
        None,
        "nothing happened yet"
    );

    node.state()
        .inject_xid(&watched[1].to_string(), 79, None, None)
        .unwrap();
    node.state()
        .inject_xid(&watched[0].to_string(), 13, Some(1), Some(0))
        .unwrap();

    let fallen = monitor.next_event(WAIT).unwrap().expect("Xid 79");
    assert_eq!(fallen.pci_address, watched[1]);
    assert!(fallen.is_critical());
    assert_eq!(
        fallen.kind,
        HealthEventKind::Xid {
            xid: 79,
            critical: true,
            gpu_instance_id: None,
            compute_instance_id: None
        }
    );
    let application = monitor.next_event(WAIT).unwrap().expect("Xid 13");
    assert_eq!(application.pci_address, watched[0]);
    assert!(!application.is_critical(), "Xid 13 is an application error");
    assert_eq!(
        application.kind,
        HealthEventKind::Xid {
            xid: 13,
            critical: false,
            gpu_instance_id: Some(1),
            compute_instance_id: Some(0)
        }
    );
}

#[test]
fn events_of_unwatched_cards_and_from_before_registration_are_not_delivered() {
    let node = MockNode::from_fixture("h100-sxm5-80gb-x8.yaml");
    let backend = node.backend();
    node.state()
        .inject_xid(&node.pci(0).to_string(), 48, None, None)
        .unwrap();
    let mut monitor = backend.health_monitor(&[node.pci(0)]).unwrap();
    node.state()
        .inject_xid(&node.pci(1).to_string(), 48, None, None)
        .unwrap();
    assert_eq!(monitor.next_event(Duration::from_millis(100)).unwrap(), None);
}

#[test]
fn the_policy_decides_what_is_critical() {
    let node = MockNode::from_fixture("a30.yaml");
    let backend = node.backend_with_policy(XidPolicy::default().ignoring([63]).treating_as_critical([109]));
    let pci = node.pci(0);
    let mut monitor = backend.health_monitor(&[pci]).unwrap();
    for xid in [63, 109] {
        node.state().inject_xid(&pci.to_string(), xid, None, None).unwrap();
    }
    let ignored = monitor.next_event(WAIT).unwrap().unwrap();
    let forced = monitor.next_event(WAIT).unwrap().unwrap();
    assert!(!ignored.is_critical(), "{ignored:?}");
    assert!(forced.is_critical(), "{forced:?}");
}

#[test]
fn xids_listed_in_the_machine_description_are_delivered_after_registration() {
    let node = MockNode::from_yaml(
        "include: [FIXTURES/a100-sxm4-40gb.yaml]\n\
         gpus:\n  - { pciBusId: \"0000:07:00.0\", model: a100-sxm4-40gb, uuid: GPU-x }\n\
         xidEvents:\n  - { pciBusId: \"0000:07:00.0\", xid: 94 }\n",
    );
    let mut monitor = node.backend().health_monitor(&[node.pci(0)]).unwrap();
    let event = monitor.next_event(WAIT).unwrap().expect("the described Xid");
    assert!(
        matches!(
            event.kind,
            HealthEventKind::Xid {
                xid: 94,
                critical: true,
                ..
            }
        ),
        "{event:?}"
    );
    assert_eq!(
        monitor.next_event(Duration::from_millis(50)).unwrap(),
        None,
        "delivered once"
    );
}

#[test]
fn a_lost_card_is_reported_once() {
    let node = MockNode::from_fixture("a30-x2.yaml");
    let backend = node.backend();
    let cards = [node.pci(0), node.pci(1)];
    let mut monitor = backend.health_monitor(&cards).unwrap();
    node.state().set_lost(&cards[1].to_string(), true).unwrap();
    let mut lost = Vec::new();
    while let Some(event) = monitor.next_event(Duration::from_millis(100)).unwrap() {
        assert_eq!(event.kind, HealthEventKind::DeviceLost);
        lost.push(event.pci_address);
    }
    // NVML does not say which card was lost: every watched card is reported.
    assert_eq!(lost, cards);
}
