//! GPU health end to end, through the real scheduler and kube-controller-manager, gpu-handler over
//! the mock NVML (faults injected through its state file) and the kubelet simulator acting as the
//! kubelet of the cluster's release (its health stream and `allocatedResourcesStatus`):
//! - an application Xid changes nothing but a counter;
//! - a critical Xid turns HardwareHealthy False, taints every device of the card (its MIG
//!   placements too), tells the running Pod (Unhealthy, with the message where the release carries
//!   it), keeps a new Pod for the card Pending; a GPU reset brings it all back and the Pod runs;
//! - a handler restart changes nothing, an administrator's clear does;
//! - with NoExecute enabled the running Pod is evicted.

mod handler_node;
mod health_reads;
mod monitoring_queries;
mod plugin_node;
mod support;

use std::time::Duration;

use gpu_api::PhysicalGPU;
use health_reads::*;
use host_fixtures::NamedHost;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use plugin_node::PluginNode;
use serde_json::json;
use support::*;
use testbed::{Progress, wait_until};

/// A Pod `pod` on the node whose claim `gpu` asks for one device of `device_type`.
async fn claim_pod(node: &PluginNode, pod: &str, device_type: &str) {
    let ns = &node.s.ns;
    let template = format!("{pod}-{}", device_type.to_lowercase());
    let class = create(
        &Api::<DeviceClass>::all(ns.client()),
        &device_type_class(ns, &template, device_type),
    )
    .await;
    one_request_template(ns, &template, json!({"deviceClassName": class.name_any()}), None).await;
    create(&ns.api::<Pod>(), &templated_pod(pod, node.s.node.name(), &template)).await;
}

fn has_taint(taints: &[(String, String, String)], key: &str, value: &str, effect: &str) -> bool {
    taints.iter().any(|(k, v, e)| k == key && v == value && e == effect)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_xid_taints_the_card_tells_its_pod_and_a_reset_brings_it_back() {
    let node = PluginNode::start("health-xid", NamedHost::A30Pcie, &[]).await;
    let ns = &node.s.ns;
    let messages = ns.cluster().server_minor().await.unwrap() >= 36;
    claim_pod(&node, "trainer", "MIG").await;
    let prepared = node.wait_prepared("trainer").await;
    let cdi = prepared.values().next().unwrap()[0].clone();
    let resource = wait_resource_health(&node, "trainer", "Healthy").await;
    assert_eq!(
        resource["resourceID"],
        cdi.as_str(),
        "the device's first CDI id, as the kubelet names it"
    );
    let claim = ns
        .api::<ResourceClaim>()
        .get(prepared.keys().next().unwrap())
        .await
        .unwrap();
    let mig_device = allocated_devices(&claim)[0].1.clone();
    assert!(mig_device.starts_with("gpu0-mig-"), "{mig_device}");

    // An application Xid: a counter, nothing else.
    let before = settled_status_version(&node).await;
    node.mock.state().inject_xid(node.s.address, 13, None, None).unwrap();
    let application = [("xid", "13"), ("class", "application")];
    wait_metrics(&node, "Xid 13 counted as application", |t| {
        monitoring_queries::value(t, "gpu_handler_xid_errors_total", &application) == Some(1.0)
    })
    .await;
    wait_passes(&node, passes(&node), 2).await;
    assert_eq!(
        node.s.gpus.get(&node.s.name).await.unwrap().resource_version(),
        before,
        "no status write"
    );
    assert!(taints(&node).await.iter().all(|(_, t)| t.is_empty()), "no taint");
    wait_resource_health(&node, "trainer", "Healthy").await;

    // A double-bit ECC error: Xid 48, after which the driver asks for a reset.
    node.mock.state().inject_xid(node.s.address, 48, None, None).unwrap();
    let condition = wait_healthy(&node, "False").await;
    assert_eq!(condition["reason"], "XidCritical");
    let message = condition["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("critical Xid 48 (double-bit ECC error) since"),
        "{message}"
    );
    assert!(message.contains("the NVIDIA driver asks for a GPU reset"), "{message}");
    let devices = wait_taints(&node, "every device of the card tainted", |devices| {
        !devices.is_empty()
            && devices.iter().all(|(_, t)| {
                has_taint(t, "gpu.deckhouse.io/xid", "48", "NoSchedule")
                    && has_taint(t, "gpu.deckhouse.io/recovery-action", "gpu-reset", "NoSchedule")
            })
    })
    .await;
    assert!(
        devices.iter().any(|(name, _)| *name == mig_device),
        "the allocated MIG device is tainted too"
    );
    let unhealthy = wait_resource_health(&node, "trainer", "Unhealthy").await;
    if messages {
        assert_eq!(unhealthy["message"], message.as_str(), "the kubelet shows our message");
    } else {
        assert!(
            unhealthy.get("message").is_none(),
            "1.34 has no message field: {unhealthy}"
        );
    }
    let text = wait_metrics(&node, "the critical cause exported", |t| {
        cause(t, "XidCritical", "48") == Some(1.0)
    })
    .await;
    assert_eq!(
        monitoring_queries::value(
            &text,
            "gpu_handler_xid_errors_total",
            &[("xid", "48"), ("class", "critical")]
        ),
        Some(1.0)
    );
    wait_gpu_event(&node, "HardwareUnhealthy", "critical Xid 48").await;

    // The user lets go of the card; a new Pod for it stays Pending while the card is tainted.
    ns.api::<Pod>()
        .delete("trainer", &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone("trainer").await;
    claim_pod(&node, "second", "Physical").await;
    let why = wait_unschedulable(ns, "second").await;
    assert!(why.contains("cannot allocate all claims"), "{why}");
    let pending = ns.api::<Pod>().get("second").await.unwrap();
    assert!(pending.spec.unwrap().node_name.is_none());

    // The administrator resets the GPU: the driver stops asking for a reset, everything clears.
    node.mock.state().reset_gpu(node.s.address).unwrap().unwrap();
    let condition = wait_healthy(&node, "True").await;
    assert_eq!(condition["reason"], "DeviceHealthy");
    wait_taints(&node, "no taint left", |devices| {
        !devices.is_empty() && devices.iter().all(|(_, t)| t.is_empty())
    })
    .await;
    wait_gpu_event(&node, "HardwareRecovered", "the GPU was reset").await;
    wait_metrics(&node, "the cause gone from the metrics", |t| {
        cause(t, "XidCritical", "48").is_none()
    })
    .await;
    node.wait_prepared("second").await;
    wait_resource_health(&node, "second", "Healthy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_keeps_the_fault_and_an_administrators_clear_ends_it() {
    let mut node = PluginNode::start("health-clear", NamedHost::A30Pcie, &[]).await;
    node.mock.state().inject_xid(node.s.address, 74, None, None).unwrap();
    let first = wait_healthy(&node, "False").await;
    assert!(
        first["message"]
            .as_str()
            .unwrap()
            .contains("critical Xid 74 (NVLink error)"),
        "{first}"
    );

    // A new handler process: the fault was kept beside the checkpoint, nothing changes.
    node.handler.terminate(Duration::from_secs(10));
    node.handler = support::components::start_handler_with(
        &node.s.ws,
        node.s.node.name(),
        &node.s.handler_kubeconfig,
        &node.mock.library_path(),
        &[],
    )
    .0;
    wait_passes(&node, 0, 3).await;
    let after = wait_healthy(&node, "False").await;
    assert_eq!(
        after["message"], first["message"],
        "the same fault, since the same time"
    );
    assert!(
        taints(&node)
            .await
            .iter()
            .all(|(_, t)| has_taint(t, "gpu.deckhouse.io/xid", "74", "NoSchedule"))
    );

    // The administrator clears it on the PhysicalGPU.
    let patch = json!({"metadata": {"annotations": {"gpu.deckhouse.io/clear-health": "2026-11-27T10:00:00Z"}}});
    Api::<PhysicalGPU>::all(node.s.ns.client())
        .patch(&node.s.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_healthy(&node, "True").await;
    wait_taints(&node, "no taint left", |devices| {
        !devices.is_empty() && devices.iter().all(|(_, t)| t.is_empty())
    })
    .await;
    let note = wait_gpu_event(&node, "HardwareRecovered", "an administrator cleared it").await;
    assert!(note.contains("Xid 74 cleared"), "{note}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_execute_the_pod_on_a_failed_card_is_evicted() {
    let env = [("HEALTH_NO_EXECUTE", "true".to_owned())];
    let node = PluginNode::start("health-noexecute", NamedHost::A30Pcie, &env).await;
    claim_pod(&node, "trainer", "Physical").await;
    node.wait_prepared("trainer").await;
    node.mock.state().inject_xid(node.s.address, 79, None, None).unwrap();
    wait_taints(&node, "the card tainted NoExecute", |devices| {
        devices
            .iter()
            .any(|(name, t)| name == "gpu0" && has_taint(t, "gpu.deckhouse.io/xid", "79", "NoExecute"))
    })
    .await;
    // kube-controller-manager's device taint eviction deletes the Pod and says so on it.
    node.wait_pod_gone("trainer").await;
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(node.s.ns.client(), node.s.ns.name());
    wait_until("the eviction Event on the Pod", Duration::from_secs(30), || async {
        let selector = "involvedObject.name=trainer,reason=DeviceTaintManagerEviction";
        let found = events
            .list(&kube::api::ListParams::default().fields(selector))
            .await?
            .items;
        Ok(if found.is_empty() {
            Progress::Pending("no DeviceTaintManagerEviction Event yet".into())
        } else {
            Progress::Done(())
        })
    })
    .await
    .unwrap();
}
