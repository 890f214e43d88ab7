//! What the real node's tests share: the node and a client, a namespace per test, the DeviceClasses
//! of docs/examples, workload Pods (the test bed's userland image) and their output, and waits that
//! fail with what they last saw.

// Each test binary uses a part of what is shared here.
#![allow(dead_code, unused_imports)]

pub mod module {
    pub use real_node::module_status::wait_module_ready;
}

mod claims;
mod handler_pod;
mod mps_node;
mod namespaces;
mod node_state;
mod pods;
mod scrape;

use std::time::Duration;

use kube::Client;
use real_node::node::RealNode;

pub use claims::{
    allocated_uuids, allocation_results, claim, mps_share_claim, published_device, resource_slices, share_claim,
};
pub use handler_pod::{delete_handler_pod, handler_back, handler_pod, now};
pub use mps_node::{MPS_DIR, STATIC_PODS, mps_mounts, wait_no_mps_left};
pub use namespaces::{
    TestNamespace, apply, apply_example_device_classes, delete_namespace, delete_object, first_fit_mps_class,
    namespace, wait_device_class,
};
pub use node_state::{CDI_DIR, CHECKPOINT, cdi_specs, checkpoint, claim_uid, claim_uids, mig_state, spec_of};
pub use pods::{
    SHOW_GPUS, create_pod, finish_run, gpu_lines, logs, mig_lines, run_to_end, section, try_logs, wait_phase,
    workload_pod,
};
pub use scrape::{sample, scrape};

/// The test bed's workload image: sh and busybox tools, glibc, ldconfig (images.py).
pub const WORKLOAD_IMAGE: &str = "registry.testbed.invalid/workload:1";
pub use real_node::module_status::{MODULE_NAMESPACE, describe, module_pods};
/// A workload Pod runs its script within this.
pub const POD_DONE: Duration = Duration::from_secs(180);

pub async fn node() -> (&'static RealNode, Client) {
    let node = RealNode::get().await.expect("the real node (tools/testbed/node-up.sh)");
    let client = node.client().await.expect("a client of the real node's API server");
    (node, client)
}

/// The node with the module Ready and the DeviceClasses of docs/examples applied: where a test of
/// claims starts.
pub async fn node_with_example_classes() -> (&'static RealNode, Client) {
    let (node, client) = node().await;
    module::wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    (node, client)
}

/// Serializes tests that allocate the node's cards (a handful of cards, no test waits on another).
pub static CARDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
