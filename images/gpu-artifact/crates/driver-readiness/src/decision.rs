//! The DriverReady rule. Pure: a Pod (or none) in, a condition out.

use k8s_openapi::api::core::v1::Pod;

/// The condition to publish, without its timestamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub status: &'static str,
    pub reason: String,
    pub message: String,
}

/// Picks the validator Pod that speaks for a node: Pods being deleted do not; a Ready one wins
/// over others (a rollout briefly runs two); otherwise the newest.
pub fn speaking_validator<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Option<&'a Pod> {
    let mut live: Vec<&Pod> = pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect();
    live.sort_by_key(|p| (is_ready(p), p.metadata.creation_timestamp.clone()));
    live.pop()
}

pub fn verdict(validator: Option<&Pod>) -> Verdict {
    let Some(pod) = validator else {
        return Verdict {
            status: "Unknown",
            reason: "ValidatorNotFound".into(),
            message: "no driver validator Pod runs on this node yet".into(),
        };
    };
    let name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.name.as_deref().unwrap_or_default()
    );
    if is_ready(pod) {
        return Verdict {
            status: "True",
            reason: "ValidatorReady".into(),
            message: format!("driver validator Pod {name} is Ready"),
        };
    }
    let (reason, detail) = not_ready_cause(pod);
    Verdict {
        status: "False",
        reason,
        message: format!("driver validator Pod {name} is not Ready: {detail}"),
    }
}

fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The most specific cause the Pod reports: a failing container's state (what a validator's init
/// container prints when the driver is missing), else the Ready condition, else the phase.
fn not_ready_cause(pod: &Pod) -> (String, String) {
    let status = pod.status.as_ref();
    let containers = status.into_iter().flat_map(|s| {
        s.init_container_statuses
            .iter()
            .flatten()
            .chain(s.container_statuses.iter().flatten())
    });
    for container in containers {
        let state = container.state.as_ref();
        if let Some(waiting) = state.and_then(|s| s.waiting.as_ref()) {
            let reason = waiting.reason.clone().unwrap_or_else(|| "Waiting".into());
            let message = waiting.message.clone().unwrap_or_default();
            return (
                reason.clone(),
                format!("container {} {reason}: {message}", container.name)
                    .trim_end_matches(": ")
                    .to_owned(),
            );
        }
        if let Some(done) = state.and_then(|s| s.terminated.as_ref()).filter(|t| t.exit_code != 0) {
            let reason = done.reason.clone().unwrap_or_else(|| "Error".into());
            let message = done.message.clone().unwrap_or_default();
            return (
                reason,
                format!("container {} exited {}: {message}", container.name, done.exit_code)
                    .trim_end_matches(": ")
                    .to_owned(),
            );
        }
    }
    if let Some(ready) = ready_condition(pod) {
        let reason = ready.reason.clone().unwrap_or_else(|| "NotReady".into());
        return (
            reason,
            ready
                .message
                .clone()
                .unwrap_or_else(|| "Ready condition is False".into()),
        );
    }
    let phase = status.and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into());
    ("ValidatorNotReady".into(), format!("phase {phase}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "d8-gpu", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn no_validator_is_unknown() {
        let v = verdict(None);
        assert_eq!((v.status, v.reason.as_str()), ("Unknown", "ValidatorNotFound"));
    }

    #[test]
    fn ready_validator_is_true() {
        let p = pod("v-1", json!({"conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(verdict(Some(&p)).status, "True");
    }

    #[test]
    fn failing_init_container_gives_its_reason_and_message() {
        let p = pod(
            "v-1",
            json!({
                "conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
                "initContainerStatuses": [{"name": "driver-validation", "image": "x", "imageID": "", "ready": false, "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "nvidia-smi: NVIDIA driver not loaded"}}}],
            }),
        );
        let v = verdict(Some(&p));
        assert_eq!((v.status, v.reason.as_str()), ("False", "CrashLoopBackOff"));
        assert!(
            v.message.contains("d8-gpu/v-1") && v.message.contains("NVIDIA driver not loaded"),
            "{}",
            v.message
        );
    }

    #[test]
    fn not_ready_without_container_detail_uses_the_condition() {
        let p = pod(
            "v-1",
            json!({"conditions": [{"type": "Ready", "status": "False", "reason": "ContainersNotReady", "message": "containers with unready status: [validator]"}]}),
        );
        let v = verdict(Some(&p));
        assert_eq!(v.reason, "ContainersNotReady");
        assert!(
            v.message.ends_with("containers with unready status: [validator]"),
            "{}",
            v.message
        );
    }

    #[test]
    fn a_ready_pod_speaks_over_a_newer_unready_one_and_deleting_pods_never_do() {
        let ready = pod("old", json!({"conditions": [{"type": "Ready", "status": "True"}]}));
        let mut newer = pod("new", json!({"phase": "Pending"}));
        newer.metadata.creation_timestamp = serde_json::from_value(json!("2026-02-01T00:00:00Z")).unwrap();
        assert_eq!(
            speaking_validator([&newer, &ready]).unwrap().metadata.name.as_deref(),
            Some("old")
        );
        let mut deleting = ready.clone();
        deleting.metadata.deletion_timestamp = newer.metadata.creation_timestamp.clone();
        assert_eq!(
            speaking_validator([&deleting, &newer])
                .unwrap()
                .metadata
                .name
                .as_deref(),
            Some("new")
        );
    }
}
