//! The readiness hook (`hook ready`, every 15 s): sets the `IsReady` condition and the phase of the
//! Module object, as module-sdk's readiness hook does, so `kubectl get module gpu` shows Ready once
//! the module's controllers run. Ready also says which feature gates are off (the feature-gates hook
//! keeps `internal.kubernetes.missingFeatureGates`): the module works without them, with less.

use anyhow::Context;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::gates::GATES;
use crate::object_patch::merge_patch_status;
use crate::protocol::{HookInput, HookOutput, QUEUE};

const CONDITION: &str = "IsReady";
const NAMESPACE: &str = "d8-gpu";

/// The `readiness` entry of `hook config` (module-sdk's `ReadinessConfig` with its 15 s default).
pub fn config() -> Value {
    json!({
        "configVersion": "v1",
        "metadata": {"name": "readiness", "path": "gpu/readiness"},
        "schedule": [{"name": "gpu-moduleReadinessSchedule", "crontab": "*/15 * * * * *", "queue": QUEUE}],
    })
}

pub async fn run(input: HookInput, module: &str) -> anyhow::Result<HookOutput> {
    let client = Client::try_default().await?;
    let gvk = GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "Module");
    let modules: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    let object = modules
        .get(module)
        .await
        .with_context(|| format!("GET Module {module}"))?;
    let probe = probe(&client).await?;
    let mut output = HookOutput::default();
    if let Some(patch) = status_patch(&object.data, probe, &missing_gates(&input), OffsetDateTime::now_utc()) {
        output
            .kubernetes_patch
            .push(merge_patch_status("deckhouse.io/v1alpha1", "Module", module, patch));
    }
    Ok(output)
}

/// Ok when every Deployment of the module has an available replica and the node agent runs wherever
/// it is scheduled; else what is missing.
async fn probe(client: &Client) -> anyhow::Result<Result<(), String>> {
    let by_module = ListParams::default().labels("module=gpu");
    let mut missing = Vec::new();
    for deployment in Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .list(&by_module)
        .await?
    {
        let available = deployment.status.and_then(|s| s.available_replicas).unwrap_or(0);
        if available == 0 {
            missing.push(format!(
                "Deployment {} has no available replica",
                deployment.metadata.name.unwrap_or_default()
            ));
        }
    }
    for daemon_set in Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE)
        .list(&by_module)
        .await?
    {
        let status = daemon_set.status.unwrap_or_default();
        if status.desired_number_scheduled > 0 && status.number_available.unwrap_or(0) == 0 {
            missing.push(format!(
                "DaemonSet {} has no available Pod",
                daemon_set.metadata.name.unwrap_or_default()
            ));
        }
    }
    Ok(if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    })
}

/// The gates `internal.kubernetes.missingFeatureGates` names, each with what is lost without it.
fn missing_gates(input: &HookInput) -> Vec<String> {
    let names = input
        .value("/gpu/internal/kubernetes/missingFeatureGates")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    GATES
        .iter()
        .filter(|gate| names.iter().any(|n| n == gate.name))
        .map(|gate| format!("{} ({})", gate.name, gate.without_it))
        .collect()
}

/// The merge patch of the Module's status: its conditions with `IsReady` set from the probe, and the
/// phase Ready or Reconciling. None while the Module is in a phase the hook must not touch (e.g. it is
/// being installed or disabled).
pub fn status_patch(
    module: &Value,
    probe: Result<(), String>,
    missing_gates: &[String],
    now: OffsetDateTime,
) -> Option<Value> {
    let phase = module
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !["Reconciling", "Ready", "Error"].contains(&phase) {
        return None;
    }
    let time = now.format(&Rfc3339).unwrap_or_default();
    let (status, reason, message) = match probe {
        Err(failure) => ("False", "ReadinessProbeFailed", failure),
        Ok(()) if missing_gates.is_empty() => ("True", "", String::new()),
        Ok(()) => (
            "True",
            "FeatureGatesOff",
            format!("feature gates off: {}", missing_gates.join("; ")),
        ),
    };
    let mut conditions: Vec<Value> = module
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let index = match conditions.iter().position(|c| c["type"] == CONDITION) {
        Some(index) => index,
        None => {
            conditions.push(json!({"type": CONDITION}));
            conditions.len() - 1
        }
    };
    let entry = conditions.get_mut(index)?;
    if !entry.is_object() {
        *entry = json!({"type": CONDITION});
    }
    let condition = entry.as_object_mut()?;
    if condition.get("status").and_then(Value::as_str) != Some(status) {
        condition.insert("lastTransitionTime".to_owned(), json!(time));
    }
    condition.insert("status".to_owned(), json!(status));
    condition.insert("lastProbeTime".to_owned(), json!(time));
    for (key, value) in [("reason", reason), ("message", message.as_str())] {
        match value {
            "" => _ = condition.remove(key),
            value => _ = condition.insert(key.to_owned(), json!(value)),
        }
    }
    let phase = if status == "True" { "Ready" } else { "Reconciling" };
    Some(json!({"status": {"conditions": conditions, "phase": phase}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(phase: &str, conditions: Value) -> Value {
        json!({"status": {"phase": phase, "conditions": conditions}})
    }

    #[test]
    fn a_passing_probe_makes_the_module_ready_and_keeps_other_conditions() {
        let other = json!({"type": "EnabledByModuleConfig", "status": "True"});
        let patch = status_patch(
            &module("Reconciling", json!([other.clone()])),
            Ok(()),
            &[],
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        assert_eq!(patch["status"]["phase"], "Ready");
        let conditions = patch["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions[0], other);
        assert_eq!(conditions[1]["type"], "IsReady");
        assert_eq!(conditions[1]["status"], "True");
        assert!(conditions[1].get("message").is_none());
    }

    #[test]
    fn a_failing_probe_says_why_and_missing_gates_are_named_while_ready() {
        let ready = json!([{"type": "IsReady", "status": "True", "lastTransitionTime": "then"}]);
        let failing = status_patch(
            &module("Ready", ready.clone()),
            Err("Deployment gpu-controller has no available replica".into()),
            &[],
            OffsetDateTime::UNIX_EPOCH,
        )
        .unwrap();
        let condition = &failing["status"]["conditions"][0];
        assert_eq!(
            (condition["status"].as_str(), failing["status"]["phase"].as_str()),
            (Some("False"), Some("Reconciling"))
        );
        assert_eq!(condition["reason"], "ReadinessProbeFailed");
        assert_ne!(condition["lastTransitionTime"], "then");

        let gates = vec!["DRAExtendedResource (Pods stay Pending)".to_owned()];
        let degraded = status_patch(&module("Ready", ready), Ok(()), &gates, OffsetDateTime::UNIX_EPOCH).unwrap();
        let condition = &degraded["status"]["conditions"][0];
        assert_eq!(condition["lastTransitionTime"], "then");
        assert_eq!(condition["reason"], "FeatureGatesOff");
        assert!(condition["message"].as_str().unwrap().contains("DRAExtendedResource"));
    }

    #[test]
    fn a_module_being_installed_is_left_alone() {
        assert!(
            status_patch(
                &module("Downloading", json!([])),
                Ok(()),
                &[],
                OffsetDateTime::UNIX_EPOCH
            )
            .is_none()
        );
    }
}
