//! This node's slices as the API server holds them. A deletion the publisher did not make (the
//! kubelet deletes every slice of its node when it starts, before our plugin registers again) wakes
//! the publisher, which lists the pool and puts back what is missing. Its own deletions wake it too;
//! that publication finds nothing to write.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::Notify;

/// Watches the ResourceSlices of Node `node` and notifies `deleted` when one of driver `driver` goes.
/// Runs until aborted; watch errors are retried by the watcher's backoff.
pub async fn watch_deletions(client: Client, node: String, driver: String, deleted: Arc<Notify>) {
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
    let mut events = std::pin::pin!(
        watcher(Api::<ResourceSlice>::all(client), config).backoff(controller_plumbing::WatchBackoff::default())
    );
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Delete(slice)) if slice.spec.driver == driver => {
                tracing::info!(slice = %slice.name_any(), "a ResourceSlice of this node was deleted; publishing again");
                deleted.notify_one();
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%node, %error, "watching this node's ResourceSlices failed; retrying"),
        }
    }
}
