//! The simulator against the real control plane and the real plugin transport: the real scheduler
//! binds a Pod, the simulator prepares its claim through the plugin's socket, reports it Running,
//! and releases the claim before finalising the deletion.

mod support;

use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{DeleteParams, Patch, PatchParams};
use kubelet_sim::{CallCounts, DraVersion, FAILED_PREPARE_REASON, KubeletSimOptions};
use serde_json::json;
use support::*;
use testbed::{Progress, wait_until};

fn template(class: &str) -> ResourceClaimTemplate {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}},
    }))
    .unwrap()
}

/// The name of the claim generated for the Pod's `gpu` entry.
fn generated_claim(pod: &Pod) -> String {
    pod.status.as_ref().unwrap().resource_claim_statuses.as_ref().unwrap()[0]
        .resource_claim_name
        .clone()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_claim_is_prepared_then_unprepared_on_delete() {
    let node = SimNode::start("sim-template", fast_options(), false).await;
    assert_eq!(node.sim.plugins()[DRIVER].version, Some(DraVersion::V1));
    node.create(&template(&node.class)).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    node.create(&node.pod("trainer", json!({"claims": [{"name": "gpu"}]}), uses))
        .await;

    let pod = node.running("trainer").await;
    let claim = node.claim(&generated_claim(&pod)).await;
    let claim_ref = SimNode::claim_ref(&claim);
    assert_eq!(*node.preparer.prepared.lock().unwrap(), vec![claim_ref.clone()]);
    assert_eq!(
        node.sim.prepared(node.ns.name(), "trainer"),
        Some([(claim_ref.name.clone(), vec![cdi_id(&claim_ref.uid)])].into())
    );
    let statuses = pod.status.unwrap().container_statuses.unwrap();
    assert!(statuses[0].state.as_ref().unwrap().running.is_some(), "{statuses:?}");

    node.ns
        .api::<Pod>()
        .delete("trainer", &DeleteParams::default())
        .await
        .unwrap();
    node.gone("trainer").await;
    assert_eq!(*node.preparer.unprepared.lock().unwrap(), vec![claim_ref.clone()]);
    assert_eq!(
        node.sim.calls_for(node.ns.name(), &claim_ref.name),
        CallCounts {
            prepare: 1,
            unprepare: 1
        }
    );
    assert_eq!(node.sim.prepared(node.ns.name(), "trainer"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_error_is_a_pod_event_and_is_retried() {
    let node = SimNode::start("sim-retry", fast_options(), false).await;
    node.preparer.failures.store(2, Ordering::SeqCst);
    node.create(&template(&node.class)).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    node.create(&node.pod("trainer", json!({"claims": [{"name": "gpu"}]}), uses))
        .await;

    let pod = node.running("trainer").await;
    let claim = generated_claim(&pod);
    assert_eq!(
        node.preparer.prepared.lock().unwrap().len(),
        3,
        "two failures, then success"
    );
    assert_eq!(node.sim.calls_for(node.ns.name(), &claim).prepare, 3);

    let events = node.pod_events("trainer", FAILED_PREPARE_REASON).await;
    let message = events
        .first()
        .and_then(|e| e.message.clone())
        .expect("a FailedPrepareDynamicResources Event on the Pod");
    assert!(
        message.contains(&format!("ResourceClaim {}/{claim}", node.ns.name())) && message.contains(BUSY),
        "{message}"
    );
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_claim_is_unprepared_when_its_last_pod_leaves() {
    let node = SimNode::start("sim-shared", fast_options(), false).await;
    let claim: ResourceClaim = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": node.class}}]}},
    }))
    .unwrap();
    node.create(&claim).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "shared"}]});
    for name in ["first", "second"] {
        node.create(&node.pod(name, json!({"claims": [{"name": "gpu"}]}), uses.clone()))
            .await;
    }
    node.running("first").await;
    node.running("second").await;
    let prepared_once = CallCounts {
        prepare: 1,
        unprepare: 0,
    };
    assert_eq!(node.sim.calls_for(node.ns.name(), "shared"), prepared_once);

    let pods = node.ns.api::<Pod>();
    pods.delete("first", &DeleteParams::default()).await.unwrap();
    node.gone("first").await;
    assert_eq!(
        node.sim.calls_for(node.ns.name(), "shared"),
        prepared_once,
        "still used by the second Pod"
    );
    assert!(node.preparer.unprepared.lock().unwrap().is_empty());

    pods.delete("second", &DeleteParams::default()).await.unwrap();
    node.gone("second").await;
    assert_eq!(
        node.sim.calls_for(node.ns.name(), "shared"),
        CallCounts {
            prepare: 1,
            unprepare: 1
        }
    );
}

/// The scheduler's claim for an extended resource, through a kubelet that speaks only v1beta1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_resource_claim_is_prepared_over_v1beta1() {
    let options = KubeletSimOptions {
        supported_versions: vec![DraVersion::V1beta1],
        ..fast_options()
    };
    let node = SimNode::start("sim-extended", options, true).await;
    assert_eq!(node.sim.plugins()[DRIVER].version, Some(DraVersion::V1beta1));
    node.create(&node.pod("infer", json!({"limits": {node.resource_name.clone(): "1"}}), json!({})))
        .await;

    let pod = node.running("infer").await;
    let claim_name = pod
        .status
        .unwrap()
        .extended_resource_claim_status
        .unwrap()
        .resource_claim_name;
    let claim = SimNode::claim_ref(&node.claim(&claim_name).await);
    assert_eq!(*node.preparer.prepared.lock().unwrap(), vec![claim.clone()]);
    assert_eq!(
        node.sim.prepared(node.ns.name(), "infer"),
        Some([(claim_name, vec![cdi_id(&claim.uid)])].into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_plugin_is_registered_again() {
    let node = SimNode::start("sim-restart", fast_options(), false).await;
    assert_eq!(node.sim.plugins()[DRIVER].handshakes, 1);

    node.plugin_shutdown.trigger();
    node.plugin.stopped().await;
    let shutdown = component_base::Shutdown::new();
    let config = kubelet_plugin::PluginConfig {
        kubelet_root: node.root.path().to_owned(),
        ..kubelet_plugin::PluginConfig::default()
    };
    let restarted = kubelet_plugin::PluginServer::start(config, std::sync::Arc::clone(&node.preparer), shutdown)
        .await
        .unwrap();
    let mut registered = restarted.registered();
    tokio::time::timeout(Duration::from_secs(10), registered.wait_for(|r| *r))
        .await
        .expect("the simulator registers the restarted plugin")
        .unwrap();
    wait_until("a second handshake", Duration::from_secs(5), || async {
        let handshakes = node.sim.plugins()[DRIVER].handshakes;
        Ok(if handshakes == 2 {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{handshakes} handshakes"))
        })
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_that_finished_releases_its_claim_but_stays() {
    let node = SimNode::start("sim-finished", fast_options(), false).await;
    node.create(&template(&node.class)).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    node.create(&node.pod("job", json!({"claims": [{"name": "gpu"}]}), uses))
        .await;
    let pod = node.running("job").await;
    let claim = generated_claim(&pod);

    // What the kubelet would write when the container exits 0.
    let finished = json!({"status": {"phase": "Succeeded"}});
    node.ns
        .api::<Pod>()
        .patch_status("job", &PatchParams::default(), &Patch::Merge(&finished))
        .await
        .unwrap();
    wait_until(
        "the finished Pod's claim to be unprepared",
        Duration::from_secs(30),
        || async {
            let calls = node.sim.calls_for(node.ns.name(), &claim);
            Ok(if calls.unprepare == 1 {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{calls:?}"))
            })
        },
    )
    .await
    .unwrap();
    let pod = node.ns.api::<Pod>().get("job").await.unwrap();
    assert_eq!(
        pod.metadata.deletion_timestamp, None,
        "a finished Pod is not deleted by the kubelet"
    );
    assert_eq!(node.sim.prepared(node.ns.name(), "job"), None);
}
