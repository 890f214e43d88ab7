//! Reading GPU health where the system stores it, for the health e2e tests: the HardwareHealthy
//! condition, the taints of the node's published devices, a Pod's `allocatedResourcesStatus`, the
//! handler's metrics and the Events on a PhysicalGPU. Every read waits with a deadline and reports
//! what it last saw.

#![allow(dead_code)]

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::{Api, ResourceExt};
use serde_json::Value;
use testbed::{Progress, wait_until};

use crate::handler_node::{healthy, healthy_is};
use crate::monitoring_queries::{scrape, value};
use crate::plugin_node::PluginNode;
use crate::support::node_objects::node_slices;

/// `(key, value, effect)` of each taint, by device name, of every device the node publishes.
pub async fn taints(node: &PluginNode) -> Vec<(String, Vec<(String, String, String)>)> {
    node_slices(&node.s.ns.client(), node.s.node.name())
        .await
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| {
            let taints = d
                .taints
                .iter()
                .flatten()
                .map(|t| (t.key.clone(), t.value.clone().unwrap_or_default(), t.effect.clone()))
                .collect();
            (d.name.clone(), taints)
        })
        .collect()
}

/// Waits until the published devices satisfy `done`; returns them.
pub async fn wait_taints(
    node: &PluginNode,
    what: &str,
    done: impl Fn(&[(String, Vec<(String, String, String)>)]) -> bool,
) -> Vec<(String, Vec<(String, String, String)>)> {
    wait_until(what, Duration::from_secs(60), || async {
        let seen = taints(node).await;
        Ok(if done(&seen) {
            Progress::Done(seen)
        } else {
            Progress::Pending(format!("{seen:?}"))
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", node.handler.log()))
}

/// Waits until HardwareHealthy of the node's card is `status`; returns the condition.
pub async fn wait_healthy(node: &PluginNode, status: &str) -> Value {
    let stored = node
        .s
        .wait_status(&format!("HardwareHealthy {status}"), |st| healthy_is(st, status))
        .await;
    healthy(&stored).unwrap().clone()
}

/// The `allocatedResourcesStatus` entries of the container `main` of a Pod as the API server
/// stores it (read untyped: the 1.34 types of k8s-openapi have no `message` and would drop it).
pub fn resource_statuses(pod: &DynamicObject) -> Vec<Value> {
    pod.data["status"]["containerStatuses"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["name"] == "main")
        .flat_map(|c| c["allocatedResourcesStatus"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Waits until `pod` shows `health` for its claim `gpu`; returns that entry's one resource.
pub async fn wait_resource_health(node: &PluginNode, pod: &str, health: &str) -> Value {
    let pods: Api<DynamicObject> =
        Api::namespaced_with(node.s.ns.client(), node.s.ns.name(), &ApiResource::erase::<Pod>(&()));
    wait_until(
        &format!("pod {pod} to show {health} in allocatedResourcesStatus"),
        Duration::from_secs(60),
        || async {
            let statuses = resource_statuses(&pods.get(pod).await?);
            let found = statuses
                .iter()
                .find(|s| s["name"] == "claim:gpu")
                .and_then(|s| s["resources"].as_array()?.first().cloned())
                .filter(|r| r["health"] == health);
            Ok(match found {
                Some(resource) => Progress::Done(resource),
                None => Progress::Pending(format!("{statuses:?}")),
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", node.handler.log()))
}

/// Waits until the handler's metrics satisfy `done`; returns them.
pub async fn wait_metrics(node: &PluginNode, what: &str, done: impl Fn(&str) -> bool) -> String {
    wait_until(what, Duration::from_secs(60), || async {
        let text = scrape(node.handler_port)?;
        Ok(if done(&text) {
            Progress::Done(text)
        } else {
            let ours: Vec<&str> = text.lines().filter(|l| l.starts_with("gpu_handler_")).collect();
            Progress::Pending(ours.join("\n"))
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", node.handler.log()))
}

/// The active-cause gauge of the node's card for `cause` (None when the cause is not active).
pub fn cause(text: &str, cause: &str, detail: &str) -> Option<f64> {
    value(
        text,
        "gpu_handler_gpu_health_cause",
        &[("cause", cause), ("detail", detail)],
    )
}

/// Waits for an Event with `reason` about the node's PhysicalGPU whose note contains `text`.
pub async fn wait_gpu_event(node: &PluginNode, reason: &str, text: &str) -> String {
    let events = Api::<Event>::namespaced(node.s.ns.client(), "default");
    wait_until(
        &format!("a {reason} Event about {}", node.s.name),
        Duration::from_secs(60),
        || async {
            let notes: Vec<String> = events
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|e| {
                    e.reason.as_deref() == Some(reason)
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node.s.name.as_str())
                })
                .filter_map(|e| e.note)
                .collect();
            Ok(match notes.iter().find(|n| n.contains(text)) {
                Some(note) => Progress::Done(note.clone()),
                None => Progress::Pending(format!("{notes:?}")),
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", node.handler.log()))
}

/// How many passes the handler has finished (its `pass done` log lines).
pub fn passes(node: &PluginNode) -> usize {
    node.handler.log().matches("\"pass done\"").count()
}

/// Waits until the handler finished `more` passes after `since`.
pub async fn wait_passes(node: &PluginNode, since: usize, more: usize) {
    wait_until(
        &format!("{more} more handler passes"),
        Duration::from_secs(30),
        || async {
            let now = passes(node);
            Ok(if now >= since + more {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{now} passes"))
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- handler log ---\n{}", node.handler.log()))
}

/// The PhysicalGPU's resourceVersion once two handler passes in a row wrote nothing: what a
/// prepare changed (a MIG mode the handler reports a pass later) is stored by then, so a test can
/// tell a write of its own cause from one still on its way.
pub async fn settled_status_version(node: &PluginNode) -> Option<String> {
    let version = || async { node.s.gpus.get(&node.s.name).await.unwrap().resource_version() };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let before = version().await;
        wait_passes(node, passes(node), 2).await;
        let after = version().await;
        if before == after {
            return after;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the PhysicalGPU status never settled (last {before:?} -> {after:?})\n--- handler log ---\n{}",
            node.handler.log()
        );
    }
}
