//! Health through NVML against the mock: Xid events with their attribution, lost cards named by
//! the cards that answer "lost", and readings of memory errors, row remapping and the recovery
//! action, before and after a GPU reset.

mod support;

use std::time::Duration;

use gpu_vendor::{HealthEventKind, HealthReading, RecoveryAction, RemappedRows, VendorBackend};
use mock_nvml::state::RemappedRowsState;
use support::MockNode;

const WAIT: Duration = Duration::from_secs(2);

fn xid(xid: u64, gpu_instance_id: Option<u32>, compute_instance_id: Option<u32>) -> HealthEventKind {
    HealthEventKind::Xid {
        xid,
        gpu_instance_id,
        compute_instance_id,
    }
}

#[test]
fn injected_xids_arrive_raw_and_attributed() {
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
    assert_eq!(fallen.kind, xid(79, None, None));
    let application = monitor.next_event(WAIT).unwrap().expect("Xid 13");
    assert_eq!(application.pci_address, watched[0]);
    assert_eq!(application.kind, xid(13, Some(1), Some(0)));
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
fn xids_listed_in_the_machine_description_are_delivered_after_registration() {
    let node = MockNode::from_yaml(
        "include: [FIXTURES/a100-sxm4-40gb.yaml]\n\
         gpus:\n  - { pciBusId: \"0000:07:00.0\", model: a100-sxm4-40gb, uuid: GPU-x }\n\
         xidEvents:\n  - { pciBusId: \"0000:07:00.0\", xid: 94 }\n",
    );
    let mut monitor = node.backend().health_monitor(&[node.pci(0)]).unwrap();
    let event = monitor.next_event(WAIT).unwrap().expect("the described Xid");
    assert_eq!(event.kind, xid(94, None, None));
    assert_eq!(
        monitor.next_event(Duration::from_millis(50)).unwrap(),
        None,
        "delivered once"
    );
}

#[test]
fn only_the_card_that_answers_lost_is_reported_lost() {
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
    assert_eq!(lost, [cards[1]]);
    assert_eq!(backend.health_reading(&cards[1]).unwrap(), HealthReading::lost());
    assert!(!backend.health_reading(&cards[0]).unwrap().lost);
}

#[test]
fn a_fresh_card_reads_clean_and_faults_read_as_the_driver_reports_them() {
    let node = MockNode::from_fixture("a30.yaml");
    let backend = node.backend();
    let pci = node.pci(0);
    let clean = backend.health_reading(&pci).unwrap();
    assert_eq!(
        clean,
        HealthReading {
            lost: false,
            uncorrectable_memory_errors: Some(0),
            remapped_rows: Some(RemappedRows::default()),
            recovery_action: Some(RecoveryAction::None),
        }
    );

    // A double-bit error: the driver reports Xid 48 and asks for a reset; the row is remapped at it.
    let state = node.state();
    state.inject_xid(&pci.to_string(), 48, None, None).unwrap();
    state.set_uncorrectable_errors(&pci.to_string(), 1, 3).unwrap();
    let rows = RemappedRowsState {
        correctable: 0,
        uncorrectable: 1,
        pending: true,
        failure: false,
    };
    state.set_remapped_rows(&pci.to_string(), rows).unwrap();
    let faulty = backend.health_reading(&pci).unwrap();
    assert_eq!(faulty.uncorrectable_memory_errors, Some(1));
    assert_eq!(faulty.recovery_action, Some(RecoveryAction::GpuReset));
    assert_eq!(
        faulty.remapped_rows,
        Some(RemappedRows {
            correctable: 0,
            uncorrectable: 1,
            pending: true,
            failure: false
        })
    );

    state.reset_gpu(&pci.to_string()).unwrap().unwrap();
    let after = backend.health_reading(&pci).unwrap();
    assert_eq!(
        after.uncorrectable_memory_errors,
        Some(0),
        "the volatile counter clears"
    );
    assert_eq!(after.recovery_action, Some(RecoveryAction::None));
    let rows = after.remapped_rows.unwrap();
    assert!(
        !rows.pending && rows.uncorrectable == 1,
        "the remapping took effect: {rows:?}"
    );
}

#[test]
fn a_reset_is_refused_while_a_process_runs() {
    let node = MockNode::from_fixture("a30.yaml");
    let pci = node.pci(0).to_string();
    let process = mock_nvml::state::ProcessState {
        pid: 4242,
        used_gpu_memory_bytes: 0,
        gpu_instance_id: None,
        compute_instance_id: None,
        name: None,
    };
    node.state().add_process(&pci, process).unwrap();
    let refused = node.state().reset_gpu(&pci).unwrap().unwrap_err();
    assert!(refused.0.contains("4242"), "{refused:?}");
}
