//! A whole card: prepare writes the CDI spec and the checkpoint entry,
//! repeats return the same ids without writing again, unprepare removes both.

mod support;

use std::os::unix::fs::MetadataExt;

use gpu_vendor::VendorBackend;
use node_prepare::ClaimState;
use serde_json::json;
use support::{A30_UUID, Node, claim, physical_request};

const UID: &str = "3b0c6d1e-9a52-4d8f-a1b7-5e0f2c4a7d91";

fn identity(path: &std::path::Path) -> (u64, i64, i64) {
    let meta = std::fs::metadata(path).unwrap();
    (meta.ino(), meta.mtime(), meta.mtime_nsec())
}

#[test]
fn a_whole_card_gets_its_cdi_spec_and_a_completed_entry() {
    let node = Node::a30();
    let devices = node.preparer.prepare(&physical_request(UID)).unwrap();

    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].request_names, ["gpu"]);
    assert_eq!(devices[0].pool_name, "gpus/w1");
    assert_eq!(devices[0].device_name, "gpu0");
    assert_eq!(
        devices[0].cdi_device_ids,
        [format!("gpu.deckhouse.io/claim={UID}-gpu0")]
    );
    assert_eq!(devices[0].share_id, None);

    assert_eq!(
        node.cdi_json(UID),
        json!({
            "cdiVersion": "0.6.0",
            "kind": "gpu.deckhouse.io/claim",
            "containerEdits": {"env": [format!("NVIDIA_VISIBLE_DEVICES={A30_UUID}")]},
            "devices": [{
                "name": format!("{UID}-gpu0"),
                "containerEdits": {
                    "deviceNodes": [
                        {"path": "/dev/nvidia0"},
                        {"path": "/dev/nvidiactl"},
                        {"path": "/dev/nvidia-uvm"},
                        {"path": "/dev/nvidia-uvm-tools"},
                    ],
                },
            }],
        })
    );

    let claims = node.preparer.prepared_claims().unwrap();
    let entry = &claims[UID];
    assert_eq!(
        (entry.namespace.as_str(), entry.name.as_str()),
        ("default", "claim-3b0c6d1e-9a52-4d8f-a1b7-5e0f2c4a7d91")
    );
    assert_eq!(entry.state, ClaimState::PrepareCompleted);
    assert_eq!(entry.devices[0].device, "gpu0");
    assert_eq!(entry.devices[0].cdi_device_ids, devices[0].cdi_device_ids);
    assert_eq!(entry.devices[0].mig_instance, None);

    let file: serde_json::Value = serde_json::from_str(&node.checkpoint_text()).unwrap();
    assert_eq!(file["version"], 2);
    assert_eq!(file["data"]["bootId"], host_fixtures::FIXTURE_BOOT_ID);
    assert_eq!(file["data"]["claims"][UID]["state"], "PrepareCompleted");
    assert!(!node.mock_gpu().mig_current);
}

#[test]
fn preparing_again_returns_the_same_ids_without_writing() {
    let node = Node::a30();
    let first = node.preparer.prepare(&physical_request(UID)).unwrap();
    let checkpoint = identity(&node.checkpoint_path());
    let spec = identity(&node.cdi_path(UID));

    let again = node.restarted().prepare(&physical_request(UID)).unwrap();
    assert_eq!(again, first);
    assert_eq!(
        identity(&node.checkpoint_path()),
        checkpoint,
        "the checkpoint was rewritten"
    );
    assert_eq!(identity(&node.cdi_path(UID)), spec, "the CDI spec was rewritten");
}

#[test]
fn unprepare_removes_the_spec_and_the_entry_and_is_idempotent() {
    let node = Node::a30();
    node.preparer.prepare(&physical_request(UID)).unwrap();
    node.preparer.unprepare(&claim(UID)).unwrap();
    assert!(!node.cdi_path(UID).exists());
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
    node.preparer.unprepare(&claim(UID)).unwrap();
    node.preparer.unprepare(&claim("never-prepared")).unwrap();
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
}

#[test]
fn a_whole_card_in_mig_mode_without_claims_is_switched_back_to_mig_off() {
    let node = Node::a30();
    node.backend().set_mig_mode(&node.card(), true).unwrap();
    assert!(node.mock_gpu().mig_current);
    node.preparer.prepare(&physical_request(UID)).unwrap();
    let gpu = node.mock_gpu();
    assert!(!gpu.mig_current && !gpu.mig_pending);
}

#[test]
fn the_same_card_for_another_claim_is_refused_and_nothing_changes() {
    let node = Node::a30();
    node.preparer.prepare(&physical_request(UID)).unwrap();
    let before = node.checkpoint_text();
    let error = node
        .preparer
        .prepare(&physical_request("uid-other"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        format!("claim default/claim-uid-other: device gpu0 is prepared for claim default/claim-{UID}")
    );
    assert_eq!(node.checkpoint_text(), before);
    assert!(!node.cdi_path("uid-other").exists());
}
