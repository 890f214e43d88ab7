//! What a test reads or creates about one node: its Node, the slices our driver stored for it, and
//! the Events about it.

use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use testbed::{Progress, wait_until};

use super::DRIVER;

/// Creates a Node object named `name` with `labels`.
pub async fn create_node(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let labels: serde_json::Map<_, _> = labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    let node: Node = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
}

/// The slices of our driver stored for `node`, by name.
pub async fn node_slices(client: &Client, node: &str) -> Vec<ResourceSlice> {
    let params = ListParams::default().fields(&format!("spec.nodeName={node}"));
    let mut slices = Api::<ResourceSlice>::all(client.clone())
        .list(&params)
        .await
        .expect("list slices")
        .items;
    slices.retain(|s| s.spec.driver == DRIVER);
    slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    slices
}

/// Waits up to 30 s for an Event with `reason` about the Node `node` (Events about Nodes live in
/// `default`).
pub async fn node_event(client: &Client, node: &str, reason: &str) -> Event {
    let events = Api::<Event>::namespaced(client.clone(), "default");
    wait_until(
        &format!("the {reason} Event on the Node"),
        Duration::from_secs(30),
        || async {
            let found = events.list(&ListParams::default()).await?.items.into_iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(node)
            });
            Ok(match found {
                Some(event) => Progress::Done(event),
                None => Progress::Pending("no such Event yet".into()),
            })
        },
    )
    .await
    .unwrap()
}
