//! A reflector cache kept equal to the cluster until shutdown, for components that only read.

use component_base::Shutdown;
use futures::StreamExt;
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// Keeps `writer`'s cache equal to what `api` lists until shutdown; watch failures are logged and
/// retried with backoff. `what` names the cache in the logs.
pub async fn keep_cache<K>(api: Api<K>, writer: Writer<K>, shutdown: Shutdown, what: &str)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    keep_cache_of(api, watcher::Config::default(), writer, shutdown, what).await;
}

/// [`keep_cache`] of what `config` selects (a label or field selector).
pub async fn keep_cache_of<K>(api: Api<K>, config: watcher::Config, writer: Writer<K>, shutdown: Shutdown, what: &str)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let watch = watcher(api, config)
        .backoff(crate::WatchBackoff::default())
        .reflect(writer)
        .for_each(|event| {
            if let Err(error) = event {
                tracing::warn!(%error, "watch for the {what} failed; retrying");
            }
            futures::future::ready(())
        });
    tokio::select! {
        _ = watch => {}
        _ = shutdown.cancelled() => {}
    }
}
