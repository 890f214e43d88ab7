//! What a restarted handler finds and repairs: a prepare killed half-way
//! (the real fault point, in a child process that kills itself), MIG devices made
//! behind its back, a reboot, and a checkpoint it cannot trust.

mod support;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;

use gpu_vendor::{MigPlacement, VendorBackend};
use node_prepare::{ClaimState, FAULT_POINT_ENV, PrepareError, ReconcileReport};
use support::{Node, claim, mig_request, physical_request, preparer_at};

/// Set in a child process: `<host root>\n<mock library>` of the parent's node.
const CHILD_NODE_ENV: &str = "NODE_PREPARE_TEST_CHILD_NODE";
const SIGKILL: i32 = 9;

/// In the child (and only there): prepares `uid-crash` with a MIG device at
/// placement 2, which the fault point must abort; never returns in a child.
fn prepare_in_child_if_asked() {
    let Ok(node) = std::env::var(CHILD_NODE_ENV) else {
        return;
    };
    let (root, library) = node.split_once('\n').expect("root and library");
    let preparer = preparer_at(&PathBuf::from(root), &PathBuf::from(library));
    let result = preparer.prepare(&mig_request("uid-crash", &[2]));
    panic!("the fault point did not abort the prepare: {result:?}");
}

/// Runs `test` of this binary in a child process on `node`'s files with the
/// fault point set; returns once the child is dead.
fn crash_child(test: &str, point: &str, node: &Node) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(
            CHILD_NODE_ENV,
            format!("{}\n{}", node.host.root().display(), node.mock.library_path().display()),
        )
        .env(FAULT_POINT_ENV, point)
        .output()
        .unwrap();
    assert_eq!(
        output.status.signal(),
        Some(SIGKILL),
        "the child was not aborted at {point}: {}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn a_crash_after_the_mig_device_was_made_is_rolled_back_at_start() {
    prepare_in_child_if_asked();
    let node = Node::a30();
    crash_child(
        "a_crash_after_the_mig_device_was_made_is_rolled_back_at_start",
        "prepare/after/create-devices",
        &node,
    );
    assert_eq!(node.instance_starts(), [2], "the child made the device before dying");
    assert!(node.mock_gpu().mig_current);
    assert_eq!(
        node.preparer.prepared_claims().unwrap()["uid-crash"].state,
        ClaimState::PrepareStarted
    );

    let report = node.restarted().reconcile().unwrap();
    assert_eq!(
        report,
        ReconcileReport {
            started_claims_rolled_back: 1,
            ..ReconcileReport::default()
        }
    );
    let gpu = node.mock_gpu();
    assert!(gpu.gpu_instances.is_empty());
    assert!(
        !gpu.mig_current && !gpu.mig_pending,
        "MIG off: the rollback left no MIG claim"
    );
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
    assert!(!node.cdi_path("uid-crash").exists());

    // The kubelet retries: the claim prepares from a clean card.
    let devices = node.restarted().prepare(&mig_request("uid-crash", &[2])).unwrap();
    assert_eq!(devices[0].device_name, "gpu0-mig-2g12gb-2");
    assert_eq!(node.instance_starts(), [2]);
}

#[test]
fn a_crash_right_after_prepare_started_leaves_only_the_record_which_start_removes() {
    prepare_in_child_if_asked();
    let node = Node::a30();
    crash_child(
        "a_crash_right_after_prepare_started_leaves_only_the_record_which_start_removes",
        "prepare/after/record-prepare-started",
        &node,
    );
    assert_eq!(
        node.preparer.prepared_claims().unwrap()["uid-crash"].state,
        ClaimState::PrepareStarted
    );
    assert!(node.mock_gpu().gpu_instances.is_empty());
    assert!(!node.mock_gpu().mig_current);

    let report = node.restarted().reconcile().unwrap();
    assert_eq!(report.started_claims_rolled_back, 1);
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
}

#[test]
fn a_started_claim_found_by_a_retried_prepare_is_rolled_back_first() {
    prepare_in_child_if_asked();
    let node = Node::a30();
    crash_child(
        "a_started_claim_found_by_a_retried_prepare_is_rolled_back_first",
        "prepare/after/create-devices",
        &node,
    );
    // No reconcile: the kubelet's retry reaches the new handler first.
    let devices = node.restarted().prepare(&mig_request("uid-crash", &[2])).unwrap();
    assert_eq!(node.mock_gpu().gpu_instances.len(), 1);
    let record = node.preparer.prepared_claims().unwrap()["uid-crash"].devices[0]
        .mig_instance
        .clone()
        .unwrap();
    assert_eq!(node.mock_gpu().gpu_instances[0].id, record.gpu_instance_id);
    assert_eq!(
        devices[0].cdi_device_ids,
        ["gpu.deckhouse.io/claim=uid-crash-gpu0-mig-2g12gb-2"]
    );
}

#[test]
fn mig_devices_made_behind_the_handlers_back_are_kept_and_reported() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    let backend = node.backend();
    backend
        .create_mig_device(&node.card(), 5, MigPlacement { start: 2, size: 2 })
        .unwrap();
    assert_eq!(node.instance_starts(), [0, 2]);

    let report = node.restarted().reconcile().unwrap();
    assert_eq!(
        report.foreign_mig_instances,
        ["0000:01:00.0: 2g.12gb (GPU instance 2, memory slices 2..4)"],
        "kept and named: an admin's, or a Pod's whose checkpoint was lost"
    );
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(node.instance_starts(), [0, 2], "nothing destroyed");
    assert!(node.mock_gpu().mig_current);

    // A claim that needs the foreign instance's slices is refused, naming it.
    let error = node
        .preparer
        .prepare(&mig_request("uid-b", &[2]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("2g.12gb (GPU instance 2, memory slices 2..4)") && error.contains("never destroys"),
        "{error}"
    );
    assert_eq!(node.instance_starts(), [0, 2]);

    // When the node's own claim leaves, MIG stays on: an instance the node did not make is there.
    node.preparer.unprepare(&claim("uid-a")).unwrap();
    assert_eq!(node.instance_starts(), [2]);
    assert!(node.mock_gpu().mig_current);
}

#[test]
fn a_card_an_admin_put_in_mig_mode_stays_in_it() {
    let node = Node::a30();
    let backend = node.backend();
    backend.set_mig_mode(&node.card(), true).unwrap();

    let report = node.preparer.reconcile().unwrap();
    assert_eq!(
        report,
        ReconcileReport::default(),
        "the admin's MIG mode is not the node's to undo"
    );
    assert!(node.mock_gpu().mig_current);

    // A MIG claim uses it and leaves it as it was.
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    node.preparer.unprepare(&claim("uid-a")).unwrap();
    assert!(node.mock_gpu().mig_current, "still in MIG mode");

    // A whole-card claim turns it off for its time and gives it back.
    node.preparer.prepare(&physical_request("uid-p")).unwrap();
    assert!(!node.mock_gpu().mig_current);
    node.preparer.unprepare(&claim("uid-p")).unwrap();
    assert!(node.mock_gpu().mig_current, "the admin's MIG mode is back");
    assert_eq!(node.preparer.reconcile().unwrap(), ReconcileReport::default());
}

#[test]
fn claims_of_an_earlier_boot_are_forgotten() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    // The reboot: instances are gone, MIG mode persists, /proc has a new boot id.
    let backend = node.backend();
    let gi = backend.mig_instances(&node.card()).unwrap()[0].gpu_instance_id;
    backend.destroy_mig_device(&node.card(), gi).unwrap();
    node.host.write_boot_id("0d5e1c2a-7b3f-4e8a-9c61-2f4b8a0e7d33");

    let report = node.restarted().reconcile().unwrap();
    assert_eq!(report.claims_dropped_after_reboot, 1);
    assert_eq!(
        report.cards_mig_restored, 1,
        "the node had turned MIG on for the forgotten claim"
    );
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
    assert!(!node.cdi_path("uid-a").exists());
    let file: serde_json::Value = serde_json::from_str(&node.checkpoint_text()).unwrap();
    assert_eq!(file["data"]["bootId"], "0d5e1c2a-7b3f-4e8a-9c61-2f4b8a0e7d33");
    assert!(!node.mock_gpu().mig_current);
}

#[test]
fn a_corrupt_checkpoint_is_an_error_naming_the_file_never_an_empty_start() {
    let node = Node::a30();
    node.preparer.prepare(&physical_request("uid-p")).unwrap();
    let path = node.checkpoint_path();
    let damaged = node.checkpoint_text().replace("uid-p", "uid-q");
    std::fs::write(&path, &damaged).unwrap();

    let shown = path.display().to_string();
    let errors = [
        node.preparer.prepare(&physical_request("uid-x")).unwrap_err(),
        node.preparer.unprepare(&claim("uid-p")).unwrap_err(),
        node.preparer.reconcile().unwrap_err(),
        node.preparer.prepared_claims().unwrap_err(),
    ];
    for error in errors {
        assert!(matches!(error, PrepareError::CorruptCheckpoint { .. }), "{error}");
        assert!(error.to_string().contains(&shown), "{error}");
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        damaged,
        "the file is kept for a human"
    );
    assert!(node.cdi_path("uid-p").exists());
}
