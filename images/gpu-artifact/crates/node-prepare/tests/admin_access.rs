//! Admin access (`adminAccess: true` on an allocation result): an admin reaches a card for
//! monitoring or maintenance beside the claims that hold it. The node prepares such a result
//! without the exclusivity checks, makes nothing on the card for it (no MIG instance, no MIG
//! mode, no sharing change), lets it block no other claim, and its unprepare removes only its own
//! CDI spec and checkpoint entry.

mod support;

use gpu_api::opaque_config::SharingStrategy;
use node_prepare::{CheckpointClaim, PrepareRequest};
use serde_json::{Value, json};
use support::{A30_UUID, Node, mig_request, physical_request, share_request};

/// `request` with every device's result marked `adminAccess: true`.
fn admin(mut request: PrepareRequest) -> PrepareRequest {
    for device in &mut request.devices {
        device.admin_access = true;
    }
    request
}

fn entry(node: &Node, uid: &str) -> CheckpointClaim {
    node.preparer.prepared_claims().unwrap()[uid].clone()
}

/// The device nodes of the spec's first device.
fn device_nodes(spec: &Value) -> Vec<String> {
    spec["devices"][0]["containerEdits"]["deviceNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_admin_result_is_prepared_on_a_card_another_claim_holds() {
    let node = Node::a30();
    node.preparer.prepare(&physical_request("uid-user")).unwrap();
    let held = entry(&node, "uid-user");

    let devices = node
        .preparer
        .prepare(&admin(physical_request("uid-admin")))
        .expect("admin access needs no free card");

    assert_eq!(devices[0].cdi_device_ids, ["gpu.deckhouse.io/claim=uid-admin-gpu0"]);
    let spec = node.cdi_json("uid-admin");
    assert_eq!(
        spec["containerEdits"]["env"],
        json!([format!("NVIDIA_VISIBLE_DEVICES={A30_UUID}")])
    );
    assert!(device_nodes(&spec).contains(&"/dev/nvidia0".to_owned()), "{spec}");
    assert!(entry(&node, "uid-admin").devices[0].admin_access);
    assert_eq!(entry(&node, "uid-user"), held, "the holder's record is untouched");
}

#[test]
fn an_admin_result_blocks_no_later_claim_of_the_card() {
    let node = Node::a30();
    node.preparer.prepare(&admin(physical_request("uid-admin"))).unwrap();
    node.preparer
        .prepare(&physical_request("uid-user"))
        .expect("the admin's result holds nothing");

    let node = Node::a30();
    node.preparer.prepare(&admin(physical_request("uid-admin"))).unwrap();
    node.preparer
        .prepare(&mig_request("uid-mig", &[0]))
        .expect("MIG is switched on beside an admin's whole-card result: it holds no mode");
    assert_eq!(node.instance_starts(), [0]);
}

#[test]
fn an_admin_result_on_a_mig_offer_makes_no_instance_and_gets_the_parent_card() {
    let node = Node::a30();
    let before = node.mock_gpu();
    node.preparer
        .prepare(&admin(mig_request("uid-admin", &[0, 2])))
        .unwrap();

    let after = node.mock_gpu();
    assert!(
        after.gpu_instances.is_empty(),
        "no MIG instance: {:?}",
        after.gpu_instances
    );
    assert_eq!(
        (after.mig_current, after.mig_pending),
        (before.mig_current, before.mig_pending),
        "the card's MIG mode is unchanged"
    );
    let spec = node.cdi_json("uid-admin");
    assert_eq!(
        spec["containerEdits"]["env"],
        json!([format!("NVIDIA_VISIBLE_DEVICES={A30_UUID}")]),
        "the card once, though two MIG offers of it were allocated"
    );
    let nodes = device_nodes(&spec);
    assert!(nodes.contains(&"/dev/nvidia0".to_owned()), "{nodes:?}");
    assert!(
        !nodes.iter().any(|n| n.starts_with("/dev/nvidia-caps")),
        "no MIG capability: {nodes:?}"
    );
}

#[test]
fn an_admin_result_changes_no_sharing_of_a_shared_card() {
    let node = Node::a30();
    node.preparer
        .prepare(&share_request("uid-mps", SharingStrategy::Mps, 50))
        .unwrap();
    let calls = node.tool_calls();

    node.preparer
        .prepare(&admin(share_request("uid-admin", SharingStrategy::TimeSlicing, 1)))
        .expect("a TimeSlicing admin result beside MPS shares changes nothing on the card");

    assert_eq!(node.tool_calls(), calls, "no time slice set, no daemon started");
    assert_eq!(node.time_slice(A30_UUID), None);
    let env = node.cdi_json("uid-admin")["containerEdits"]["env"].clone();
    assert_eq!(env, json!([format!("NVIDIA_VISIBLE_DEVICES={A30_UUID}")]));
}

#[test]
fn unpreparing_an_admin_result_leaves_the_holders_state() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-mig", &[0])).unwrap();
    node.preparer.prepare(&admin(physical_request("uid-admin"))).unwrap();
    let held = entry(&node, "uid-mig");
    let spec = node.cdi_json("uid-mig");

    node.preparer.unprepare(&support::claim("uid-admin")).unwrap();

    assert!(!node.cdi_path("uid-admin").exists());
    assert_eq!(node.cdi_json("uid-mig"), spec);
    let claims = node.preparer.prepared_claims().unwrap();
    assert_eq!(claims.keys().collect::<Vec<_>>(), ["uid-mig"]);
    assert_eq!(claims["uid-mig"], held);
    assert_eq!(node.instance_starts(), [0], "the holder's MIG instance stays");
    assert!(node.mock_gpu().mig_current, "MIG stays on for the holder");
}

#[test]
fn vfio_is_refused_for_an_admin_result() {
    let node = Node::a30();
    let mut request = admin(physical_request("uid-admin"));
    request.vfio_requested = true;
    request.devices[0].vfio_allowed = true;
    let error = node.preparer.prepare(&request).unwrap_err().to_string();
    assert!(
        error.contains(
            "device gpu0: it is allocated with adminAccess, which reaches the card without holding it; \
             VFIO passthrough needs the card held exclusively"
        ),
        "{error}"
    );
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
}
