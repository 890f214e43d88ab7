//! What Pending reasons need to know of nodes beyond the engine, read lean: the names of the Nodes
//! labelled `gpu.deckhouse.io/allow-mig=false` (a metadata-only watch with that label selector),
//! and per PhysicalGPU only its node and DriverReady condition (the rest is dropped before it is
//! stored). Neither is needed to allocate: a watch that cannot start (no permission) only leaves
//! those reasons out. When the facts change (a node's label, a card's DriverReady), a round runs,
//! so a Pending claim's reason is updated even when no claim, slice or class changed.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use gpu_api::{NodeInfo, PhysicalGPU, PhysicalGPUStatus};
use k8s_openapi::api::core::v1::Node;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::Notify;

use crate::pending_reason::{ALLOW_MIG_LABEL, NodeFacts};

/// The condition a card's driver readiness is reported in.
const DRIVER_READY: &str = "DriverReady";

#[derive(Clone)]
pub struct NodeFactStores {
    mig_off: Store<PartialObjectMeta<Node>>,
    gpus: Store<PhysicalGPU>,
}

/// Keeps of a PhysicalGPU its name, node and DriverReady condition.
pub fn trimmed(gpu: &mut PhysicalGPU) {
    let status = gpu.status.take().unwrap_or_default();
    let driver_ready = status
        .conditions
        .into_iter()
        .flatten()
        .filter(|c| c.type_ == DRIVER_READY)
        .collect::<Vec<_>>();
    gpu.metadata = kube::core::ObjectMeta {
        name: gpu.metadata.name.take(),
        resource_version: gpu.metadata.resource_version.take(),
        ..Default::default()
    };
    gpu.status = Some(PhysicalGPUStatus {
        node_info: status.node_info.map(|n| NodeInfo {
            node_name: n.node_name,
            ..Default::default()
        }),
        conditions: Some(driver_ready),
        ..Default::default()
    });
}

/// The facts from the stored objects: nodes with MIG off, and per node its cards whose
/// DriverReady is False.
pub fn facts(mig_off: impl IntoIterator<Item = String>, gpus: &[Arc<PhysicalGPU>]) -> NodeFacts {
    let mut facts = NodeFacts {
        mig_off: mig_off.into_iter().collect(),
        ..NodeFacts::default()
    };
    for gpu in gpus {
        let Some(status) = gpu.status.as_ref() else { continue };
        let not_ready = status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == DRIVER_READY && c.status == "False");
        if let (true, Some(node)) = (not_ready, status.node_info.as_ref()) {
            let cards = facts.driver_not_ready.entry(node.node_name.clone()).or_default();
            cards.push(gpu.metadata.name.clone().unwrap_or_default());
            cards.sort();
        }
    }
    facts
}

/// The facts last seen, to tell a change from an event that changed nothing of them.
#[derive(Default)]
pub struct LastFacts(Option<NodeFacts>);

impl LastFacts {
    /// Records `now`; true when it differs from what was seen before.
    pub fn changed(&mut self, now: NodeFacts) -> bool {
        let changed = self.0.as_ref() != Some(&now);
        self.0 = Some(now);
        changed
    }
}

/// Wakes a round when an event changed the facts.
#[derive(Clone)]
struct OnChange {
    stores: NodeFactStores,
    last: Arc<Mutex<LastFacts>>,
    trigger: Arc<Notify>,
}

impl OnChange {
    fn seen<K>(&self, event: &watcher::Event<K>) {
        // A list in progress is judged once complete (each object would cost a pass over all).
        if matches!(event, watcher::Event::Init | watcher::Event::InitApply(_)) {
            return;
        }
        let facts = self.stores.facts();
        if self.last.lock().unwrap_or_else(|p| p.into_inner()).changed(facts) {
            self.trigger.notify_one();
        }
    }
}

impl NodeFactStores {
    /// Starts both watches; `trigger` is notified when the facts change.
    pub fn watch(client: &Client, trigger: Arc<Notify>) -> NodeFactStores {
        let (mig_off, nodes_writer) = reflector::store();
        let (gpus, gpus_writer) = reflector::store();
        let stores = NodeFactStores { mig_off, gpus };
        let on_change = OnChange {
            stores: stores.clone(),
            last: Arc::default(),
            trigger,
        };
        let config = watcher::Config::default().labels(&format!("{ALLOW_MIG_LABEL}=false"));
        let nodes = watcher(Api::<PartialObjectMeta<Node>>::all(client.clone()), config)
            .backoff(controller_plumbing::WatchBackoff::default())
            .reflect(nodes_writer);
        tokio::spawn(drain(nodes, "nodes with allow-mig=false", on_change.clone()));
        let cards = watcher(Api::<PhysicalGPU>::all(client.clone()), watcher::Config::default())
            .backoff(controller_plumbing::WatchBackoff::default())
            .modify(trimmed)
            .reflect(gpus_writer);
        tokio::spawn(drain(cards, "PhysicalGPUs", on_change));
        stores
    }

    pub fn facts(&self) -> NodeFacts {
        let nodes = self
            .mig_off
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect::<Vec<_>>();
        facts(nodes, &self.gpus.state())
    }
}

async fn drain<S, K>(stream: S, what: &'static str, on_change: OnChange)
where
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    stream
        .for_each(|event| {
            match event {
                Ok(event) => on_change.seen(&event),
                Err(error) => tracing::warn!(%error, what, "watch error (Pending reasons leave this out)"),
            }
            futures::future::ready(())
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gpu(name: &str, node: &str, ready: &str) -> PhysicalGPU {
        serde_json::from_value(json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
            "metadata": {"name": name, "labels": {"a": "b"}}, "spec": {},
            "status": {"nodeInfo": {"nodeName": node, "kernelRelease": "6.1"},
                "conditions": [
                    {"type": "DriverReady", "status": ready, "reason": "r", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                    {"type": "HardwareHealthy", "status": "True", "reason": "r", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]}}))
        .unwrap()
    }

    #[test]
    fn only_node_and_driver_readiness_are_kept() {
        let mut card = gpu("w1-10", "w1", "False");
        trimmed(&mut card);
        let kept = serde_json::to_value(&card).unwrap();
        assert_eq!(
            kept["status"],
            json!({"nodeInfo": {"nodeName": "w1"}, "conditions": [
                {"type": "DriverReady", "status": "False", "reason": "r", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"}]})
        );
        assert_eq!(kept["metadata"], json!({"name": "w1-10"}));
    }

    #[test]
    fn a_round_is_woken_only_when_the_facts_change() {
        let mut last = LastFacts::default();
        let off = facts(["w9".to_owned()], &[]);
        assert!(last.changed(NodeFacts::default()), "the first facts are news");
        assert!(!last.changed(NodeFacts::default()));
        assert!(last.changed(off.clone()), "a node's MIG went off");
        assert!(!last.changed(off), "an event that changed nothing of the facts");
        let not_ready = facts([], &[Arc::new(gpu("w1-10", "w1", "False"))]);
        assert!(last.changed(not_ready), "a card is no longer DriverReady");
    }

    #[test]
    fn facts_name_cards_not_driver_ready_per_node() {
        let gpus: Vec<_> = [
            gpu("w1-20", "w1", "False"),
            gpu("w1-10", "w1", "False"),
            gpu("w2-10", "w2", "True"),
            gpu("w3-10", "w3", "Unknown"),
        ]
        .into_iter()
        .map(Arc::new)
        .collect();
        let facts = facts(["w9".to_owned()], &gpus);
        assert_eq!(facts.mig_off, ["w9".to_owned()].into());
        assert_eq!(
            facts.driver_not_ready,
            [("w1".to_owned(), vec!["w1-10".to_owned(), "w1-20".to_owned()])].into()
        );
    }
}
