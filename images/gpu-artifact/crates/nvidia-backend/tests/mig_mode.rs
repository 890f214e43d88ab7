//! MIG mode changes: applied at once on an idle card, left pending (and
//! reported as in use) while processes run or instances exist.

mod support;

use gpu_vendor::{MigPlacement, MigState, VendorBackend, VendorError};
use mock_nvml::state::ProcessState;
use support::{MockNode, SINGLE_CARD_FIXTURES};

fn process(pid: u32) -> ProcessState {
    ProcessState {
        pid,
        used_gpu_memory_bytes: 512 << 20,
        gpu_instance_id: None,
        compute_instance_id: None,
        name: None,
    }
}

#[test]
fn an_idle_card_toggles_at_once() {
    for fixture in SINGLE_CARD_FIXTURES {
        let node = MockNode::from_fixture(fixture);
        let backend = node.backend();
        let pci = node.pci(0);
        let on = backend.set_mig_mode(&pci, true).unwrap();
        assert_eq!(
            (on.current, on.pending),
            (MigState::Enabled, MigState::Enabled),
            "{fixture}"
        );
        let off = backend.set_mig_mode(&pci, false).unwrap();
        assert_eq!(
            (off.current, off.pending),
            (MigState::Disabled, MigState::Disabled),
            "{fixture}"
        );
        assert_eq!(backend.mig_mode(&pci).unwrap(), Some(off));
    }
}

#[test]
fn a_busy_card_keeps_the_change_pending_until_it_is_idle() {
    let node = MockNode::from_fixture("a100-sxm4-40gb.yaml");
    let backend = node.backend();
    let pci = node.pci(0);
    node.state().add_process(&pci.to_string(), process(100)).unwrap();

    let refused = backend.set_mig_mode(&pci, true);
    assert!(matches!(refused, Err(VendorError::InUse { .. })), "{refused:?}");
    let mode = backend.mig_mode(&pci).unwrap().unwrap();
    assert_eq!((mode.current, mode.pending), (MigState::Disabled, MigState::Enabled));
    assert!(mode.is_change_pending());

    node.state().remove_process(&pci.to_string(), 100).unwrap();
    let applied = backend.set_mig_mode(&pci, true).unwrap();
    assert_eq!(
        (applied.current, applied.pending),
        (MigState::Enabled, MigState::Enabled)
    );
}

#[test]
fn mig_cannot_be_turned_off_while_instances_exist() {
    let node = MockNode::from_fixture("a30.yaml");
    let backend = node.backend();
    let pci = node.pci(0);
    backend.set_mig_mode(&pci, true).unwrap();
    let created = backend
        .create_mig_device(&pci, 5, MigPlacement { start: 0, size: 2 })
        .unwrap();

    let refused = backend.set_mig_mode(&pci, false);
    assert!(matches!(refused, Err(VendorError::InUse { .. })), "{refused:?}");
    assert_eq!(backend.mig_mode(&pci).unwrap().unwrap().current, MigState::Enabled);

    backend.destroy_mig_device(&pci, created.gpu_instance_id).unwrap();
    let off = backend.set_mig_mode(&pci, false).unwrap();
    assert_eq!(off.current, MigState::Disabled);
    assert!(backend.mig_instances(&pci).unwrap().is_empty());
}

#[test]
fn running_processes_are_reported_with_their_mig_attribution() {
    let node = MockNode::from_fixture("a30-x2.yaml");
    let backend = node.backend();
    let (plain, mig) = (node.pci(0), node.pci(1));
    assert!(
        backend.running_processes(&plain).unwrap().is_empty(),
        "a fresh card is free"
    );

    node.state().add_process(&plain.to_string(), process(7)).unwrap();
    let created = backend
        .create_mig_device(&mig, 14, MigPlacement { start: 1, size: 1 })
        .unwrap();
    let in_mig = ProcessState {
        gpu_instance_id: Some(created.gpu_instance_id),
        compute_instance_id: created.compute_instance_id,
        ..process(8)
    };
    node.state().add_process(&mig.to_string(), in_mig).unwrap();

    let on_plain = backend.running_processes(&plain).unwrap();
    assert_eq!(on_plain.len(), 1);
    assert_eq!((on_plain[0].pid, on_plain[0].used_memory_bytes), (7, Some(512 << 20)));
    assert_eq!(on_plain[0].gpu_instance_id, None);
    let on_mig = backend.running_processes(&mig).unwrap();
    assert_eq!(on_mig.len(), 1);
    assert_eq!(on_mig[0].pid, 8);
    assert_eq!(on_mig[0].gpu_instance_id, Some(created.gpu_instance_id));
    assert_eq!(on_mig[0].compute_instance_id, created.compute_instance_id);
}
