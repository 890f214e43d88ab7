//! What the simulated kubelet writes to the API server for a Pod: the running status, Events,
//! and the final deletion with grace period 0.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource};
use serde_json::{Value, json};

/// The kubelet's reason for a failed NodePrepareResources.
pub const FAILED_PREPARE_REASON: &str = "FailedPrepareDynamicResources";
/// The simulator's reason for a failed NodeUnprepareResources (the kubelet only logs these).
pub const FAILED_UNPREPARE_REASON: &str = "FailedUnprepareDynamicResources";

/// Patches the status subresource as a kubelet whose containers all started: phase Running, the
/// readiness conditions True, every container running (init containers completed).
pub(crate) async fn set_running(client: &Client, pod: &Pod) -> kube::Result<()> {
    let now = Timestamp::now().to_string();
    let spec = pod.spec.clone().unwrap_or_default();
    let condition = |type_: &str| json!({"type": type_, "status": "True", "lastTransitionTime": now});
    let running: Vec<Value> = spec
        .containers
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "containerID": format!("sim://{}", c.name), "ready": true, "started": true,
                "restartCount": 0, "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let completed: Vec<Value> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
                "containerID": format!("sim://{}", c.name), "ready": true, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}},
            })
        })
        .collect();
    let mut status = json!({
        "phase": "Running",
        "startTime": now,
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("ContainersReady"),
            condition("Ready"),
        ],
        "containerStatuses": running,
    });
    if !completed.is_empty() {
        status["initContainerStatuses"] = json!(completed);
    }
    pods(client, pod)
        .patch_status(
            &name(pod),
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": status})),
        )
        .await?;
    Ok(())
}

/// The Pod's container statuses as stored, with each container's `allocatedResourcesStatus` set to
/// `statuses` (an empty list removes it).
fn with_resource_health(pod: &Pod, statuses: &crate::pod_health::ResourceStatuses) -> (Vec<Value>, Vec<Value>) {
    let stored: Vec<Value> = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.clone())
        .unwrap_or_default()
        .iter()
        .map(|status| serde_json::to_value(status).unwrap_or_default())
        .collect();
    let containers = stored
        .iter()
        .map(|status| {
            let mut value = status.clone();
            let entries = status["name"].as_str().and_then(|name| statuses.get(name));
            match entries.filter(|entries| !entries.is_empty()) {
                Some(entries) => value["allocatedResourcesStatus"] = json!(entries),
                None => {
                    if let Some(object) = value.as_object_mut() {
                        object.remove("allocatedResourcesStatus");
                    }
                }
            }
            value
        })
        .collect();
    (stored, containers)
}

/// Whether the stored Pod shows `statuses`, messages aside: the typed Pod this simulator reads
/// (k8s-openapi's 1.34 types) has no `message` field, so it cannot tell whether a message is stored.
/// Other status writes replace the container statuses and drop the field: then it is not shown.
pub(crate) fn shows_resource_health(pod: &Pod, statuses: &crate::pod_health::ResourceStatuses) -> bool {
    let (stored, mut containers) = with_resource_health(pod, statuses);
    for container in &mut containers {
        for entry in container["allocatedResourcesStatus"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            for resource in entry["resources"].as_array_mut().into_iter().flatten() {
                if let Some(resource) = resource.as_object_mut() {
                    resource.remove("message");
                }
            }
        }
    }
    containers == stored
}

/// Writes each container's `allocatedResourcesStatus` (an empty list removes it), keeping the rest
/// of the container statuses as stored. Only over the Pod as `pod` saw it (a resourceVersion
/// precondition): the list is written whole, and a stale copy would take back newer statuses.
pub(crate) async fn set_resource_health(
    client: &Client,
    pod: &Pod,
    statuses: &crate::pod_health::ResourceStatuses,
) -> kube::Result<()> {
    let (_, containers) = with_resource_health(pod, statuses);
    let patch = json!({
        "metadata": {"resourceVersion": pod.metadata.resource_version},
        "status": {"containerStatuses": containers},
    });
    pods(client, pod)
        .patch_status(&name(pod), &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Finalises a terminating Pod as the kubelet does once its resources are released.
pub(crate) async fn delete_now(client: &Client, pod: &Pod) -> kube::Result<()> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: pod.metadata.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods(client, pod).delete(&name(pod), &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error),
    }
}

/// A Warning Event on the Pod, as `kubectl describe pod` shows the kubelet's.
pub(crate) async fn warn(recorder: &Recorder, pod: &Pod, reason: &str, action: &str, message: String) {
    let event = Event {
        type_: EventType::Warning,
        reason: reason.to_owned(),
        note: Some(message),
        action: action.to_owned(),
        secondary: None,
    };
    if let Err(error) = recorder.publish(&event, &pod.object_ref(&())).await {
        tracing::warn!(pod = %key(pod), %error, "could not record an Event");
    }
}

/// `<namespace>/<name>` of a Pod.
pub(crate) fn key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        name(pod)
    )
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn pods(client: &Client, pod: &Pod) -> Api<Pod> {
    Api::namespaced(client.clone(), pod.metadata.namespace.as_deref().unwrap_or_default())
}
