//! The one Node this handler runs on, reduced to what publication depends on: its identity (the
//! slices' owner) and its offer labels (`gpu.deckhouse.io/allow-mig`, `allow-timeslicing`,
//! `allow-mps`). Other Node changes (heartbeats,
//! status) do not wake the publisher.

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use dra_offers::{ALLOW_MIG_LABEL, ALLOW_MPS_LABEL, ALLOW_TIMESLICING_LABEL};

/// What publication needs from the Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub name: String,
    pub uid: String,
    pub allow_mig: Option<String>,
    pub allow_time_slicing: Option<String>,
    pub allow_mps: Option<String>,
}

impl NodeView {
    fn of(node: &Node) -> Self {
        Self {
            name: node.name_any(),
            uid: node.uid().unwrap_or_default(),
            allow_mig: node.labels().get(ALLOW_MIG_LABEL).cloned(),
            allow_time_slicing: node.labels().get(ALLOW_TIMESLICING_LABEL).cloned(),
            allow_mps: node.labels().get(ALLOW_MPS_LABEL).cloned(),
        }
    }
}

/// Watches Node `name` and publishes its view on `view` whenever the view changes. Returns when
/// every receiver is gone; watch errors are retried by the watcher's backoff.
pub async fn watch_node(client: Client, name: String, view: watch::Sender<Option<NodeView>>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut nodes = std::pin::pin!(
        watcher(Api::<Node>::all(client), config)
            .backoff(controller_plumbing::WatchBackoff::default())
            .applied_objects()
    );
    while let Some(event) = nodes.next().await {
        match event {
            Ok(node) => {
                let seen = Some(NodeView::of(&node));
                view.send_if_modified(|current| {
                    let changed = *current != seen;
                    if changed {
                        current.clone_from(&seen);
                    }
                    changed
                });
            }
            Err(error) => tracing::warn!(node = %name, %error, "watching the node failed; retrying"),
        }
        if view.is_closed() {
            return;
        }
    }
}
