//! What the controller reads besides GPUClasses, as reflector caches: DeviceClasses (ours, and
//! anyone's that may hold a name we want), PhysicalGPUs (labels), ResourceSlices and ResourceClaims
//! (device counts). Any change to them asks for every class to be reconciled again (the controller
//! debounces the bursts): a new card, an allocation or a hand edit can change any class.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{Stream, StreamExt};
use gpu_api::PhysicalGPU;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::mpsc;

/// The caches, and a version that moves with every change they see.
#[derive(Clone)]
pub(crate) struct ClusterView {
    pub device_classes: Store<DeviceClass>,
    pub physical_gpus: Store<PhysicalGPU>,
    pub slices: Store<ResourceSlice>,
    pub claims: Store<ResourceClaim>,
    version: Arc<AtomicU64>,
}

impl ClusterView {
    /// The view, a stream that yields whenever anything changed (coalesced: one pending signal at
    /// most), and the future that runs the watches (polled by the caller, dropped to stop them).
    pub fn start(
        client: &Client,
    ) -> (
        ClusterView,
        impl Stream<Item = ()> + Send + 'static,
        impl Future<Output = ()> + Send + 'static,
    ) {
        let (trigger, changes) = mpsc::channel(1);
        let version = Arc::new(AtomicU64::new(0));
        let (device_classes, a) = watch_into(Api::all(client.clone()), &trigger, &version);
        let (physical_gpus, b) = watch_into(Api::all(client.clone()), &trigger, &version);
        let (slices, c) = watch_into(Api::all(client.clone()), &trigger, &version);
        let (claims, d) = watch_into(Api::all(client.clone()), &trigger, &version);
        let view = ClusterView {
            device_classes,
            physical_gpus,
            slices,
            claims,
            version,
        };
        let changes = futures::stream::unfold(changes, |mut changes| async move {
            changes.recv().await.map(|()| ((), changes))
        });
        let watches = async move {
            futures::join!(a, b, c, d);
        };
        (view, changes, watches)
    }

    /// Waits until every cache has its first full list: before that an absent DeviceClass may
    /// only be unseen, and a foreign one must never be taken for absent.
    pub async fn wait_until_ready(&self) -> anyhow::Result<()> {
        self.device_classes.wait_until_ready().await?;
        self.physical_gpus.wait_until_ready().await?;
        self.slices.wait_until_ready().await?;
        self.claims.wait_until_ready().await?;
        Ok(())
    }

    /// Moves with every change any cache sees.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }
}

fn watch_into<K>(
    api: Api<K>,
    trigger: &mpsc::Sender<()>,
    version: &Arc<AtomicU64>,
) -> (Store<K>, impl Future<Output = ()> + Send + 'static + use<K>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let trigger = trigger.clone();
    let version = version.clone();
    let kind = K::kind(&()).into_owned();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .for_each(move |event| {
            match event {
                Ok(_) => {
                    version.fetch_add(1, Ordering::SeqCst);
                    // Full: a signal is already pending, which covers this change too.
                    let _ = trigger.try_send(());
                }
                Err(error) => tracing::warn!(%error, kind = %kind, "watch failed; retrying"),
            }
            futures::future::ready(())
        });
    (store, stream)
}
