//! MIG ownership end to end (invariant 4): the node undoes only what its checkpoint says it did. A
//! card an admin put in MIG mode, with an instance of the admin's, keeps both across a handler
//! start, its free placements still serve claims, and the card stays in MIG mode when they leave;
//! a foreign instance is reported on the Node. A MIG mode change held up by DCGM (its host engine
//! holds the card open, so the change stays pending, as on A100/H100) is answered by pausing the
//! module's DCGM on the node (the Node label the DCGM DaemonSets select against; here the test
//! plays the DaemonSet controller and takes the host engine off the card), telling why, and
//! retrying until the card is let go; the label goes when the prepare ends.

mod handler_node;
mod plugin_node;
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gpu_vendor::{MigPlacement, VendorBackend};
use host_fixtures::NamedHost;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use mock_nvml::state::ClientState;
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use plugin_node::PluginNode;
use serde_json::json;
use support::*;
use testbed::{Progress, wait_until};

const A30: &str = "0000:01:00.0";
const PAUSED: &str = "gpu.deckhouse.io/dcgm-paused";

async fn mig_template(node: &PluginNode, profile: &str) {
    let ns = &node.s.ns;
    let expression = format!(
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "MIG" && device.attributes["gpu.deckhouse.io"].migProfile == "{profile}""#
    );
    let class = device_class(ns, "mig", &expression, None);
    create(&Api::<DeviceClass>::all(ns.client()), &class).await;
    one_request_template(ns, "mig", json!({"deviceClassName": class.metadata.name}), None).await;
}

/// Warning Events about the Node with `reason`.
async fn node_events(node: &PluginNode, reason: &str) -> Vec<String> {
    let events = Api::<Event>::namespaced(node.s.ns.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    events
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node.s.node.name()))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admins_mig_layout_stays_and_its_free_placements_serve_claims() {
    let s = handler_node::setup("mig-admin", NamedHost::A30Pcie).await;
    s.set_driver_ready("True").await;
    let mock = s.install_mock("nvml-admin");
    // The admin's layout, made before the handler ever starts: MIG on, a 2g.12gb instance at 0.
    let admin = NvidiaBackend::load(NvidiaBackendConfig {
        library_path: Some(mock.library_path()),
    })
    .unwrap();
    let card = A30.parse().unwrap();
    admin.set_mig_mode(&card, true).unwrap();
    admin
        .create_mig_device(&card, 5, MigPlacement { start: 0, size: 2 })
        .unwrap();
    drop(admin);
    let node = PluginNode::launch_with_mock(s, mock, &[]).await;

    wait_until("the foreign instance reported", Duration::from_secs(60), || async {
        let notes = node_events(&node, "ForeignMigInstances").await;
        Ok(match notes.into_iter().find(|n| n.contains("2g.12gb (GPU instance")) {
            Some(note) => Progress::Done(note),
            None => Progress::Pending("no event yet".into()),
        })
    })
    .await
    .unwrap();
    assert_eq!(node.mig_instances(), vec![(0, 2)], "the admin's instance is kept");
    assert!(node.mig_enabled(), "the admin's MIG mode is kept");

    mig_template(&node, "2g.12gb").await;
    let pods = node.s.ns.api::<Pod>();
    create(&pods, &templated_pod("free", node.s.node.name(), "mig")).await;
    node.wait_prepared("free").await;
    assert_eq!(node.mig_instances(), vec![(0, 2), (2, 2)]);
    pods.delete("free", &DeleteParams::default()).await.unwrap();
    node.wait_pod_gone("free").await;
    assert_eq!(
        node.mig_instances(),
        vec![(0, 2)],
        "only the claim's instance is destroyed"
    );
    assert!(node.mig_enabled(), "the card stays in the admin's MIG mode");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mig_mode_change_held_up_by_dcgm_pauses_it_tells_why_and_completes() {
    let node = PluginNode::start("mig-dcgm", NamedHost::A30Pcie, &[]).await;
    let dcgm = ClientState {
        pid: 4321,
        name: "nv-hostengine".into(),
    };
    node.mock.state().add_client(A30, dcgm.clone()).unwrap();
    // The DaemonSet controller: DCGM's Pod leaves a node labelled paused and comes back after.
    let saw_pause = Arc::new(AtomicBool::new(false));
    let controller = tokio::spawn({
        let nodes = Api::<Node>::all(node.s.ns.client());
        let name = node.s.node.name().to_owned();
        let state = node.mock.state().clone();
        let saw_pause = Arc::clone(&saw_pause);
        async move {
            let mut running = true;
            loop {
                let paused = nodes
                    .get(&name)
                    .await
                    .ok()
                    .and_then(|n| n.metadata.labels)
                    .is_some_and(|labels| labels.contains_key(PAUSED));
                if paused && running {
                    saw_pause.store(true, Ordering::SeqCst);
                    state.remove_client(A30, 4321).unwrap();
                    running = false;
                } else if !paused && !running {
                    state.add_client(A30, dcgm.clone()).unwrap();
                    running = true;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    });
    mig_template(&node, "2g.12gb").await;
    create(
        &node.s.ns.api::<Pod>(),
        &templated_pod("trainer", node.s.node.name(), "mig"),
    )
    .await;
    node.wait_prepared("trainer").await;
    assert!(saw_pause.load(Ordering::SeqCst), "DCGM was paused on the node");
    assert_eq!(node.mig_instances().len(), 1);

    let events = Api::<Event>::namespaced(node.s.ns.client(), node.s.ns.name())
        .list(&ListParams::default())
        .await
        .unwrap();
    let told = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("MigModeChangePending"))
        .filter_map(|e| e.note.clone())
        .next()
        .expect("a MigModeChangePending Event on the claim or the Pod");
    assert!(
        told.contains("turning MIG mode on stayed pending")
            && told.contains("NVML lists no process")
            && told.contains("DCGM"),
        "{told}"
    );
    wait_until("the DCGM pause lifted", Duration::from_secs(30), || async {
        let labels = Api::<Node>::all(node.s.ns.client())
            .get(node.s.node.name())
            .await?
            .metadata
            .labels;
        Ok(if labels.is_some_and(|l| l.contains_key(PAUSED)) {
            Progress::Pending("still paused".into())
        } else {
            Progress::Done(())
        })
    })
    .await
    .unwrap();
    controller.abort();
}
