//! One Pod's life on the simulated node, like the kubelet's pod worker: prepare its claims (retry
//! with backoff, an Event per failure), report it Running, and when it terminates release its
//! claims before finalising the deletion.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use crate::dra_manager::{NotPrepared, prepare_pod, unprepare_claims};
use crate::pod_api::{self, FAILED_PREPARE_REASON, FAILED_UNPREPARE_REASON};
use crate::pod_health::allocated_resources_status;
use crate::sim::SimShared;
use crate::versions::HealthWatch;

/// The latest version of the Pod from the watch; None once the API server no longer has it.
pub(crate) type PodUpdates = watch::Receiver<Option<Pod>>;

pub(crate) async fn run(shared: Arc<SimShared>, mut updates: PodUpdates) {
    let Some(first) = updates.borrow().clone() else { return };
    let key = pod_api::key(&first);
    let uid = first.metadata.uid.clone().unwrap_or_default();

    if let Some(prepared) = prepare_until_done(&shared, &mut updates).await
        && let Some(pod) = current(&updates)
    {
        shared
            .observed
            .lock()
            .unwrap()
            .prepared_pods
            .insert(key.clone(), prepared);
        report_running(&shared, &pod, &mut updates).await;
        follow_health(&shared, &mut updates).await;
    }

    release_claims(&shared, &uid, &first, &mut updates).await;
    shared.observed.lock().unwrap().prepared_pods.remove(&key);
    finalise(&shared, &mut updates).await;
}

/// Prepares until every claim is prepared (Some) or the Pod leaves first (None).
async fn prepare_until_done(
    shared: &SimShared,
    updates: &mut PodUpdates,
) -> Option<std::collections::BTreeMap<String, Vec<String>>> {
    let mut backoff = shared.options.backoff_initial;
    loop {
        let pod = current(updates).filter(|pod| !is_leaving(pod))?;
        match prepare_pod(shared, &pod).await {
            Ok(prepared) => {
                tracing::info!(pod = %pod_api::key(&pod), ?prepared, "claims prepared");
                return Some(prepared);
            }
            Err(NotPrepared::Waiting(reason)) => {
                tracing::debug!(pod = %pod_api::key(&pod), %reason, "waiting before prepare");
                pause(updates, shared.options.poll_interval).await;
            }
            Err(NotPrepared::Failed(message)) => {
                tracing::warn!(pod = %pod_api::key(&pod), %message, "prepare failed; retrying in {backoff:?}");
                pod_api::warn(
                    &shared.recorder,
                    &pod,
                    FAILED_PREPARE_REASON,
                    "PrepareResources",
                    message,
                )
                .await;
                pause(updates, backoff).await;
                backoff = (backoff * 2).min(shared.options.backoff_max);
            }
        }
    }
}

async fn report_running(shared: &SimShared, pod: &Pod, updates: &mut PodUpdates) {
    let mut backoff = shared.options.backoff_initial;
    while let Err(error) = pod_api::set_running(&shared.client, pod).await {
        tracing::warn!(pod = %pod_api::key(pod), %error, "could not set the Running status");
        pause(updates, backoff).await;
        if current(updates).is_none_or(|pod| is_leaving(&pod)) {
            return;
        }
        backoff = (backoff * 2).min(shared.options.backoff_max);
    }
}

/// While the Pod runs, keeps its `allocatedResourcesStatus` equal to what the health cache says, as
/// the kubelet does on every status update: at once when a device's health changes, and at each
/// status sync (a device whose reports stopped turns Unknown). Nothing without the health gate.
async fn follow_health(shared: &SimShared, updates: &mut PodUpdates) {
    if shared.options.health == HealthWatch::Off {
        let _ = updates.wait_for(|pod| pod.as_ref().is_none_or(is_leaving)).await;
        return;
    }
    let mut changed = shared.health.changed.subscribe();
    let mut written = None;
    loop {
        let Some(pod) = current(updates).filter(|pod| !is_leaving(pod)) else {
            return;
        };
        let want = {
            let claims = shared.cache.lock().await;
            let health = shared.health.cache.lock().unwrap();
            allocated_resources_status(&pod, &claims, &health, shared.options.health_messages, Instant::now())
        };
        // Written again when the stored Pod lost it (other status writes replace the container
        // statuses) or when it changed, its messages included; only once the Pod has container
        // statuses to carry it.
        let has_containers = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|c| !c.is_empty());
        if has_containers && (written.as_ref() != Some(&want) || !pod_api::shows_resource_health(&pod, &want)) {
            match pod_api::set_resource_health(&shared.client, &pod, &want).await {
                Ok(()) => written = Some(want),
                Err(error) => {
                    tracing::warn!(pod = %pod_api::key(&pod), %error, "could not write allocatedResourcesStatus")
                }
            }
        }
        tokio::select! {
            _ = changed.changed() => {}
            _ = tokio::time::sleep(shared.options.status_sync) => {}
            _ = updates.wait_for(|pod| pod.as_ref().is_none_or(is_leaving)) => return,
        }
    }
}

/// Drops the Pod from its claims and unprepares those no other Pod on the node uses, until done.
async fn release_claims(shared: &SimShared, pod_uid: &str, pod: &Pod, updates: &mut PodUpdates) {
    let mut remaining = shared.cache.lock().await.release_pod(pod_uid);
    let mut backoff = shared.options.backoff_initial;
    while !remaining.is_empty() {
        match unprepare_claims(shared, remaining).await {
            Ok(()) => {
                tracing::info!(pod = %pod_api::key(pod), "claims unprepared");
                return;
            }
            Err((failed, message)) => {
                tracing::warn!(pod = %pod_api::key(pod), %message, "unprepare failed; retrying in {backoff:?}");
                let latest = current(updates).unwrap_or_else(|| pod.clone());
                pod_api::warn(
                    &shared.recorder,
                    &latest,
                    FAILED_UNPREPARE_REASON,
                    "UnprepareResources",
                    message,
                )
                .await;
                remaining = failed;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(shared.options.backoff_max);
            }
        }
    }
}

/// Deletes the Pod with grace period 0 once it is terminating (a terminal Pod waits for that).
async fn finalise(shared: &SimShared, updates: &mut PodUpdates) {
    let mut backoff = shared.options.backoff_initial;
    loop {
        let Ok(pod) = updates
            .wait_for(|pod| pod.as_ref().is_none_or(|p| p.metadata.deletion_timestamp.is_some()))
            .await
            .map(|pod| pod.clone())
        else {
            return;
        };
        let Some(pod) = pod else { return };
        match pod_api::delete_now(&shared.client, &pod).await {
            Ok(()) => return,
            Err(error) => {
                tracing::warn!(pod = %pod_api::key(&pod), %error, "could not finalise the deletion");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(shared.options.backoff_max);
            }
        }
    }
}

fn current(updates: &PodUpdates) -> Option<Pod> {
    updates.borrow().clone()
}

/// Terminating, or finished: the kubelet stops running it and releases its resources.
fn is_leaving(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.metadata.deletion_timestamp.is_some() || matches!(phase, Some("Succeeded" | "Failed"))
}

/// Sleeps for `duration`, waking early when the Pod starts leaving.
async fn pause(updates: &mut PodUpdates, duration: Duration) {
    tokio::select! {
        _ = tokio::time::sleep(duration) => {}
        _ = updates.wait_for(|pod| pod.as_ref().is_none_or(is_leaving)) => {}
    }
}
