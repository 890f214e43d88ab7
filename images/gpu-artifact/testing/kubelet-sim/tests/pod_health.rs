//! The simulator's health behaviour, as the kubelet of each release has it: it streams the plugin's
//! device health in the version the release picks, and writes each running Pod's
//! `allocatedResourcesStatus` (`claim:<name>`, the device's first CDI id, its health, the message
//! only where the release carries one); a stream that ends makes the devices Unknown.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use kube::Api;
use kube::api::{ApiResource, DynamicObject};
use kubelet_plugin::{DeviceHealthReport, ReportedHealth};
use kubelet_sim::{HealthVersion, HealthWatch, KubeletSimOptions};
use serde_json::{Value, json};
use support::*;
use testbed::{Progress, wait_until};
use tokio::sync::watch;

fn report(health: ReportedHealth, message: &str) -> Vec<DeviceHealthReport> {
    vec![DeviceHealthReport {
        pool_name: "gpus".into(),
        device_name: "gpu0".into(),
        health,
        message: message.into(),
    }]
}

/// Read untyped, as stored: k8s-openapi's 1.34 types have no `message` and would drop it.
async fn resource_health(node: &SimNode, pod: &str, want: &str) -> Value {
    let pods: Api<DynamicObject> =
        Api::namespaced_with(node.ns.client(), node.ns.name(), &ApiResource::erase::<Pod>(&()));
    wait_until(&format!("{pod} shows {want}"), Duration::from_secs(60), || async {
        let status = pods.get(pod).await?.data["status"].clone();
        let entries = status["containerStatuses"][0]["allocatedResourcesStatus"].clone();
        let resource = entries[0]["resources"][0].clone();
        Ok(if entries[0]["name"] == "claim:gpu" && resource["health"] == want {
            Progress::Done(resource)
        } else {
            Progress::Pending(entries.to_string())
        })
    })
    .await
    .unwrap()
}

async fn run(test: &str, options: KubeletSimOptions, version: HealthVersion, messages: bool) {
    let (feed, health) = watch::channel(report(ReportedHealth::Healthy, ""));
    let node = SimNode::start_with(test, options, false, Some(health)).await;
    assert_eq!(node.sim.plugins()[DRIVER].health, Some(version));
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": node.class}}]}}},
    }))
    .unwrap();
    node.create(&template).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    node.create(&node.pod("trainer", json!({"claims": [{"name": "gpu"}]}), uses))
        .await;
    node.running("trainer").await;
    let healthy = resource_health(&node, "trainer", "Healthy").await;
    let uid = node.preparer.prepared.lock().unwrap()[0].uid.clone();
    assert_eq!(healthy["resourceID"], cdi_id(&uid));

    feed.send_replace(report(ReportedHealth::Unhealthy, "critical Xid 79"));
    let unhealthy = resource_health(&node, "trainer", "Unhealthy").await;
    // A 1.34 API server has no message field in the Pod's status and drops what a kubelet sends.
    let server_keeps_messages = node.ns.cluster().server_minor().await.unwrap() >= 36;
    if messages && server_keeps_messages {
        assert_eq!(unhealthy["message"], "critical Xid 79");
    } else {
        assert!(unhealthy.get("message").is_none(), "{unhealthy}");
    }

    // The plugin's health feed ends: the stream closes and the kubelet forgets what it said.
    drop(feed);
    resource_health(&node, "trainer", "Unknown").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_37_kubelet_negotiates_v1_and_shows_the_message() {
    let options = KubeletSimOptions {
        status_sync: Duration::from_secs(1),
        ..fast_options()
    };
    run("sim-health-137", options, HealthVersion::V1, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_34_kubelet_always_calls_v1alpha1_and_has_no_message() {
    let options = KubeletSimOptions {
        health: HealthWatch::Always(HealthVersion::V1alpha1),
        health_messages: false,
        status_sync: Duration::from_secs(1),
        ..fast_options()
    };
    run("sim-health-134", options, HealthVersion::V1alpha1, false).await;
}
