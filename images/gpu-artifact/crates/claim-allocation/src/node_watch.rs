//! The Nodes a gated Pod may run on (see `pod_nodes`), kept lean. A round is woken only when what
//! decides where a Pod may run changes: a Node comes or goes, or its labels, taints, cordon or
//! allocatable change. Status heartbeats, most of a cluster's Node events, wake nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;

use crate::pod_nodes::lean_node;

/// Whether two lean Nodes admit the same Pods (lean: the allocatable kept is what `node_fit` reads).
fn same_placement(old: &Node, new: &Node) -> bool {
    let spec = |n: &Node| n.spec.as_ref().map(|s| (s.taints.clone(), s.unschedulable));
    let allocatable = |n: &Node| n.status.as_ref().map(|s| s.allocatable.clone());
    old.metadata.labels == new.metadata.labels && spec(old) == spec(new) && allocatable(old) == allocatable(new)
}

/// Watches every Node into a lean store; wakes `trigger` when placement may have changed.
pub fn watch_nodes(client: &Client, trigger: Arc<Notify>) -> Store<Node> {
    let (store, writer) = reflector::store();
    let before = store.clone();
    let changed = Arc::new(AtomicBool::new(false));
    let seen = changed.clone();
    let stream = watcher(Api::<Node>::all(client.clone()), watcher::Config::default())
        .backoff(controller_plumbing::WatchBackoff::default())
        .modify(lean_node)
        .inspect(move |event| {
            let wakes = match event {
                Ok(watcher::Event::Apply(node)) => before
                    .get(&ObjectRef::from_obj(node))
                    .is_none_or(|old| !same_placement(&old, node)),
                Ok(watcher::Event::Delete(_) | watcher::Event::InitDone) => true,
                Ok(watcher::Event::Init | watcher::Event::InitApply(_)) | Err(_) => false,
            };
            changed.store(wakes, Ordering::Relaxed);
        })
        .reflect(writer)
        .for_each(move |event| {
            if let Err(error) = event {
                tracing::warn!(%error, "Node watch error");
            }
            if seen.swap(false, Ordering::Relaxed) {
                trigger.notify_one();
            }
            futures::future::ready(())
        });
    tokio::spawn(stream);
    store
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, spec: serde_json::Value, version: &str) -> Node {
        let mut node: Node = serde_json::from_value(json!({
            "metadata": {"name": "gpu-1", "labels": labels, "resourceVersion": version},
            "spec": spec, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}))
        .unwrap();
        lean_node(&mut node);
        node
    }

    #[test]
    fn only_labels_taints_and_cordon_change_placement() {
        let old = node(json!({"zone": "a"}), json!({}), "1");
        assert!(
            same_placement(&old, &node(json!({"zone": "a"}), json!({}), "2")),
            "a status update"
        );
        assert!(!same_placement(&old, &node(json!({"zone": "b"}), json!({}), "2")));
        let tainted = json!({"taints": [{"key": "k", "effect": "NoSchedule"}]});
        assert!(!same_placement(&old, &node(json!({"zone": "a"}), tainted, "2")));
        assert!(!same_placement(
            &old,
            &node(json!({"zone": "a"}), json!({"unschedulable": true}), "2")
        ));
    }
}
