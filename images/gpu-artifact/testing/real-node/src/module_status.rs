//! The installed module's workloads, Ready or not: what the real node's tests and demo wait for.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use testbed::{Progress, wait_until};

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::Client;

pub const MODULE_NAMESPACE: &str = "d8-gpu";
/// The module is installed and every component Ready within this (first hook rounds, image unpack).
pub const MODULE_READY: Duration = Duration::from_secs(300);

const DEPLOYMENTS: [&str; 2] = ["gpu-controller", "gpu-dra-controller"];
const DAEMONSETS: [&str; 3] = ["gpu-node-agent", "gpu-driver-validator", "gpu-handler"];

/// Waits until every Deployment of the module is Available and every DaemonSet has a Ready Pod on
/// each node it is placed on; on timeout the error shows each workload, its Pods and their Events.
pub async fn wait_module_ready(client: &kube::Client) -> anyhow::Result<()> {
    wait_until(
        "every Deployment Available and every DaemonSet Ready",
        MODULE_READY,
        || async {
            let mut missing = Vec::new();
            let deployments = Api::<Deployment>::namespaced(client.clone(), MODULE_NAMESPACE);
            for name in DEPLOYMENTS {
                let available = deployments.get_opt(name).await?.is_some_and(|d| {
                    let status = d.status.unwrap_or_default();
                    status
                        .conditions
                        .unwrap_or_default()
                        .iter()
                        .any(|c| c.type_ == "Available" && c.status == "True")
                        && status.available_replicas.unwrap_or(0) >= d.spec.and_then(|s| s.replicas).unwrap_or(1)
                });
                if !available {
                    missing.push(format!("Deployment {name}: {}", pods_seen(client, name).await));
                }
            }
            let daemonsets = Api::<DaemonSet>::namespaced(client.clone(), MODULE_NAMESPACE);
            for name in DAEMONSETS {
                let ready = daemonsets.get_opt(name).await?.is_some_and(|d| {
                    let status = d.status.unwrap_or_default();
                    status.desired_number_scheduled >= 1 && status.number_ready == status.desired_number_scheduled
                });
                if !ready {
                    missing.push(format!("DaemonSet {name}: {}", pods_seen(client, name).await));
                }
            }
            Ok(if missing.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(missing.join(" | "))
            })
        },
    )
    .await
}

/// The workload's Pods, their state and the warnings the kubelet recorded for them.
async fn pods_seen(client: &kube::Client, app: &str) -> String {
    let events = Api::<Event>::namespaced(client.clone(), MODULE_NAMESPACE)
        .list(&ListParams::default())
        .await;
    let mut seen = Vec::new();
    for pod in module_pods(client, app).await {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let warnings: Vec<String> = events
            .as_ref()
            .map(|list| {
                list.items
                    .iter()
                    .filter(|e| {
                        e.involved_object.name.as_deref() == Some(name.as_str())
                            && e.type_.as_deref() == Some("Warning")
                    })
                    .map(|e| {
                        format!(
                            "{}: {}",
                            e.reason.clone().unwrap_or_default(),
                            e.message.clone().unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        seen.push(format!("{name} ({}) warnings {warnings:?}", describe(&pod)));
    }
    if seen.is_empty() {
        "no Pod".into()
    } else {
        seen.join("; ")
    }
}

/// The module's Pods with label `app=<app>`.
pub async fn module_pods(client: &Client, app: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), MODULE_NAMESPACE)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map(|list| list.items)
        .unwrap_or_default()
}

/// Phase, conditions and container states, for failure messages.
pub fn describe(pod: &Pod) -> String {
    let status = pod.status.clone().unwrap_or_default();
    let conditions: Vec<String> = status
        .conditions
        .unwrap_or_default()
        .iter()
        .map(|c| format!("{}={} {}", c.type_, c.status, c.message.clone().unwrap_or_default()))
        .collect();
    let containers: Vec<String> = status
        .container_statuses
        .unwrap_or_default()
        .iter()
        .map(|c| format!("{}: {}", c.name, serde_json::to_string(&c.state).unwrap_or_default()))
        .collect();
    format!(
        "phase {:?}; {}; {}",
        status.phase,
        conditions.join(", "),
        containers.join(", ")
    )
}
