//! gpu-controller's GPUClass controller. Each GPUClass becomes the DRA DeviceClass of the same name
//! (`gpu-class` renders it): owned by the GPUClass, written by server-side apply under the field
//! manager `gpu-controller` (a hand edit is put back on the next change it causes), its CEL
//! selectors checked for the cluster's release before they are sent. A DeviceClass of that name
//! that no GPUClass made is never touched; the GPUClass says so. The status carries `Ready`, the
//! generation it describes, the rendered names and the device counts (`class-usage`).
//!
//! Watch-driven: the GPUClasses drive a kube-runtime `Controller`; DeviceClasses, PhysicalGPUs,
//! ResourceSlices and ResourceClaims are reflector caches whose changes reconcile every class
//! again, debounced. It writes only while this replica leads.
//!
//! Deleting a GPUClass deletes its DeviceClass (garbage collection through the owner reference).
//! Claims already allocated keep their devices until they are released (the allocation lives in
//! the claim); claims not yet allocated stay pending, and virtualization reports GPUClassNotFound.
//!
//! [`class_metrics`] exports `gpu_class_*` from the GPUClasses' status, read-only, on every replica.
//!
//! It never touches nodes, ResourceSlices or claims.

pub mod class_metrics;
mod cluster_view;
mod device_class_writes;
mod reconcile;
mod status_write;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use component_base::Shutdown;
use controller_plumbing::{EventPublisher, LeaderElection, while_leading};
use dra_cel::{KubernetesRelease, SelectorCache};
use futures::StreamExt;
use gpu_api::GPUClass;
use kube::runtime::controller::{Config, Controller};
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::cluster_view::ClusterView;
use crate::reconcile::{Context, error_policy, reconcile};

/// How the controller is set up.
#[derive(Clone, Debug, Default)]
pub struct GpuClassControllerConfig {
    /// A label selector: only GPUClasses it matches are reconciled (empty: every GPUClass). For
    /// running several controllers side by side on one cluster (tests), never in the module.
    pub class_selector: String,
    /// The name Events are reported under, and this replica's identity.
    pub instance: Option<String>,
}

/// Runs until shutdown, reconciling while this replica leads.
pub async fn run(
    client: Client,
    config: GpuClassControllerConfig,
    election: Option<LeaderElection>,
    shutdown: Shutdown,
) {
    while_leading(election, shutdown, "reconciling GPUClasses", || {
        reconcile_all(client.clone(), config.clone())
    })
    .await;
}

async fn reconcile_all(client: Client, config: GpuClassControllerConfig) {
    let release = match client.apiserver_version().await {
        Ok(info) => release_of(&info.minor),
        Err(error) => {
            tracing::warn!(%error, "cannot read the API server's version; checking selectors as the newest release");
            KubernetesRelease::default()
        }
    };
    tracing::info!(
        ?release,
        "GPUClass selectors are checked as this release's API server checks them"
    );
    let (view, changes, watches) = ClusterView::start(&client);
    let classes = Api::<GPUClass>::all(client.clone());
    let mut class_watch = watcher::Config::default();
    if !config.class_selector.is_empty() {
        class_watch = class_watch.labels(&config.class_selector);
    }
    let controller = Controller::new(classes.clone(), class_watch);
    let context = Arc::new(Context {
        classes,
        device_classes: Api::all(client.clone()),
        class_store: controller.store(),
        view: view.clone(),
        cel: SelectorCache::for_release(release),
        events: EventPublisher::new(client.clone(), "gpu-controller", config.instance.clone()),
        usage: Mutex::new(None),
    });
    let reconciling = async move {
        if let Err(error) = view.wait_until_ready().await {
            tracing::warn!(%error, "the caches never filled");
            return;
        }
        controller
            .with_config(Config::default().debounce(Duration::from_millis(500)))
            .reconcile_all_on(changes)
            .run(reconcile, error_policy, context)
            .for_each(|_| futures::future::ready(()))
            .await;
    };
    tokio::select! {
        _ = watches => {}
        _ = reconciling => {}
    }
}

/// The selector environment of the API server whose minor version is `minor` (`34`, `37+`).
fn release_of(minor: &str) -> KubernetesRelease {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    match digits.parse::<u32>() {
        Ok(minor) if minor <= 34 => KubernetesRelease::V1_34,
        _ => KubernetesRelease::V1_37,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_up_to_1_34_check_as_1_34_and_later_ones_as_the_newest() {
        assert_eq!(release_of("34"), KubernetesRelease::V1_34);
        assert_eq!(release_of("37+"), KubernetesRelease::V1_37);
        assert_eq!(release_of("35"), KubernetesRelease::V1_37);
    }
}
