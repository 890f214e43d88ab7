//! Watches claims, slices, classes and Pods; while this replica leads, runs an allocation round
//! after every burst of changes. Unsatisfiable claims wait for the next change of inventory or
//! claims: nothing runs on a timer.

use std::sync::Arc;
use std::time::Duration;

use component_base::{Readiness, Shutdown};
use controller_plumbing::{EventPublisher, LeaderElection};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::Notify;

use crate::FIELD_MANAGER;
use crate::metrics::Metrics;
use crate::pass::{Memory, Round, Snapshot};

/// Quiet time that ends a burst of watch events: one round per burst.
const BURST_WINDOW: Duration = Duration::from_millis(50);
pub const READY_GATE: &str = "caches-synced";

struct Stores {
    claims: Store<ResourceClaim>,
    slices: Store<ResourceSlice>,
    classes: Store<DeviceClass>,
    pods: Store<Pod>,
}

fn watch<K>(api: Api<K>, trigger: Arc<Notify>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .backoff(controller_plumbing::WatchBackoff::default())
        .reflect(writer)
        .for_each(move |event| {
            if let Err(error) = event {
                tracing::warn!(%error, "watch error");
            }
            trigger.notify_one();
            futures::future::ready(())
        });
    tokio::spawn(stream);
    store
}

pub async fn run(
    client: Client,
    metrics: Metrics,
    mut election: Option<LeaderElection>,
    readiness: Readiness,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    readiness.register(READY_GATE);
    let trigger = Arc::new(Notify::new());
    let stores = Stores {
        claims: watch(Api::all(client.clone()), trigger.clone()),
        slices: watch(Api::all(client.clone()), trigger.clone()),
        classes: watch(Api::all(client.clone()), trigger.clone()),
        pods: watch(Api::all(client.clone()), trigger.clone()),
    };
    tokio::select! {
        synced = async {
            stores.claims.wait_until_ready().await?;
            stores.slices.wait_until_ready().await?;
            stores.classes.wait_until_ready().await?;
            stores.pods.wait_until_ready().await
        } => synced?,
        _ = shutdown.cancelled() => return Ok(()),
    }
    readiness.set(READY_GATE, true);
    let identity = std::env::var("POD_NAME").ok();
    let events = EventPublisher::new(client.clone(), FIELD_MANAGER, identity);
    let mut memory = Memory::default();
    trigger.notify_one();
    loop {
        if let Some(election) = election.as_mut()
            && !election.is_leader()
        {
            tokio::select! {
                leading = election.wait_for_leadership() => if !leading { return Ok(()) },
                _ = shutdown.cancelled() => return Ok(()),
            }
            tracing::info!("leading: allocating");
        }
        tokio::select! {
            _ = trigger.notified() => {}
            _ = shutdown.cancelled() => return Ok(()),
        }
        while tokio::time::timeout(BURST_WINDOW, trigger.notified()).await.is_ok() {}
        if election.as_ref().is_some_and(|e| !e.is_leader()) {
            continue;
        }
        let snapshot = Snapshot {
            claims: stores.claims.state(),
            slices: stores.slices.state(),
            classes: stores.classes.state(),
            pods: stores.pods.state(),
        };
        let mut round = Round {
            client: &client,
            events: &events,
            metrics: &metrics,
            memory: &mut memory,
        };
        if let Err(error) = round.run(&snapshot).await {
            // A failed write (not a conflict): the watch brings the next round; retry after a pause
            // so an API outage is not a hot loop.
            tracing::warn!(error = %format!("{error:#}"), "allocation round failed");
            let again = trigger.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(2)).await;
                again.notify_one();
            });
        }
    }
}
