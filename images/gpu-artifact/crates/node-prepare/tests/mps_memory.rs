//! MPS shares that asked for `memory`: every container of the claim gets
//! `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` for exactly the memory the scheduler counted against the card,
//! one variable for all the claim's shares; a share that asked none gets no limit, and a
//! time-sliced share none either (nothing enforces memory there).

mod support;

use gpu_api::opaque_config::SharingStrategy;
use support::{A30_UUID, Node, share_request};

const MIB: u64 = 1 << 20;

/// The `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` entries of the claim's CDI spec, wherever they are set.
fn pinned_limits(node: &Node, uid: &str) -> Vec<String> {
    let spec = node.cdi_json(uid);
    let claim_env = spec["containerEdits"]["env"].as_array().cloned().unwrap_or_default();
    let device_env = spec["devices"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|device| device["containerEdits"]["env"].as_array().cloned().unwrap_or_default());
    claim_env
        .into_iter()
        .chain(device_env)
        .filter_map(|entry| entry.as_str().map(str::to_owned))
        .filter(|entry| entry.starts_with("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="))
        .collect()
}

fn mps_share_with_memory(uid: &str, bytes: Option<u64>) -> node_prepare::PrepareRequest {
    let mut request = share_request(uid, SharingStrategy::Mps, 30);
    request.devices[0].share_memory_bytes = bytes;
    request
}

#[test]
fn an_mps_share_gets_a_pinned_limit_of_exactly_its_memory_and_one_without_memory_none() {
    let node = Node::a30();
    node.preparer
        .prepare(&mps_share_with_memory("uid-a", Some(4096 * MIB)))
        .unwrap();
    node.preparer.prepare(&mps_share_with_memory("uid-b", None)).unwrap();
    assert_eq!(
        pinned_limits(&node, "uid-a"),
        [format!("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={A30_UUID}=4096M")]
    );
    assert_eq!(pinned_limits(&node, "uid-b"), Vec::<String>::new());
}

#[test]
fn two_mps_shares_of_one_claim_give_one_variable_with_both() {
    let node = Node::a30();
    let mut request = mps_share_with_memory("uid-a", Some(1024 * MIB));
    let mut second = request.devices[0].clone();
    second.request = "second".into();
    second.share_id = Some("share-uid-a-2".into());
    second.share_memory_bytes = Some(512 * MIB);
    request.devices.push(second);
    node.preparer.prepare(&request).unwrap();
    // Both shares are of the one card: the container that gets both may pin what both asked.
    assert_eq!(
        pinned_limits(&node, "uid-a"),
        [format!("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={A30_UUID}=1536M")]
    );
}

#[test]
fn a_time_sliced_share_with_memory_gets_no_mps_limit() {
    let node = Node::a30();
    let mut request = share_request("uid-a", SharingStrategy::TimeSlicing, 50);
    request.devices[0].share_memory_bytes = Some(2048 * MIB);
    node.preparer.prepare(&request).unwrap();
    assert_eq!(pinned_limits(&node, "uid-a"), Vec::<String>::new());
}
