//! feature-gates: which of the gates the module relies on ([`crate::gates::GATES`]) the API server has
//! on, for templates that render DRA parts only where they work, and a report of every gate that is
//! off: `internal.kubernetes.missingFeatureGates` (the readiness hook puts it into the Module's status),
//! the gauge `d8_gpu_feature_gate_enabled{gate}` (alert D8GpuFeatureGateDisabled) and a Warning Event on
//! the Module per gate. The Kubernetes version is Deckhouse's `global.discovery.kubernetesVersion`; the
//! gates come from the `kubernetes_feature_enabled` series of the API server's `/metrics`.
//!
//! When `/metrics` cannot be read (the API server unreachable, or its answer refused) the hook still
//! succeeds: failing would stop every run of the module (addon-operator retries a failed beforeHelm hook
//! and renders nothing meanwhile). It writes no values, so the gates it found last stay, and sets
//! `d8_gpu_feature_gates_unknown` to 1 (alert D8GpuFeatureGatesUnknown) until a read succeeds.

use std::collections::BTreeMap;

use anyhow::Context;
use kube::Client;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::gates::{GATES, is_on, minor_of, reported_gates};
use crate::object_patch::{Regarding, create_or_update, warning_event};
use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput, MODULE_KEY, QUEUE};

const METRIC_GROUP: &str = "feature_gates";
pub const GATE_METRIC: &str = "d8_gpu_feature_gate_enabled";
const READ_METRIC_GROUP: &str = "feature_gates_read";
pub const UNKNOWN_METRIC: &str = "d8_gpu_feature_gates_unknown";

pub fn config() -> HookConfig {
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "feature-gates",
            path: "gpu/feature-gates",
        },
        before_helm: Some(1),
        // Gates change when control-plane-manager restarts the API server, which runs no module hook;
        // the schedule also renews the Events before the API server's event TTL removes them.
        schedule: vec![json!({"name": "recheck", "crontab": "*/15 * * * *", "queue": QUEUE})],
        ..HookConfig::default()
    }
}

pub async fn run(input: HookInput) -> anyhow::Result<HookOutput> {
    match read_metrics().await {
        Ok(metrics) => report(&input, &metrics, OffsetDateTime::now_utc()),
        Err(error) => Ok(unknown(&error)),
    }
}

async fn read_metrics() -> anyhow::Result<String> {
    let client = Client::try_default().await.context("a client of the API server")?;
    client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await
        .context("GET /metrics of the API server")
}

/// What the hook writes when it cannot read the gates: no values (the last ones stay), the gauge saying
/// so, and the reason in its log (addon-operator keeps a hook's stderr in Deckhouse's log).
pub fn unknown(error: &anyhow::Error) -> HookOutput {
    eprintln!(
        "{}",
        json!({"message": format!("feature gates unknown, the last ones found stay: {error:#}")})
    );
    let mut output = HookOutput::default();
    output.set_gauge(READ_METRIC_GROUP, UNKNOWN_METRIC, json!({}), 1.0);
    output
}

/// Everything the hook writes, from the values it was given and the API server's metrics text.
pub fn report(input: &HookInput, metrics: &str, now: OffsetDateTime) -> anyhow::Result<HookOutput> {
    let version = input
        .value("/global/discovery/kubernetesVersion")
        .and_then(Value::as_str)
        .context("global.discovery.kubernetesVersion is not set")?;
    let minor = minor_of(version).with_context(|| format!("global.discovery.kubernetesVersion {version:?}"))?;
    let reported = reported_gates(metrics);
    let mut output = HookOutput::default();
    output.set_gauge(READ_METRIC_GROUP, UNKNOWN_METRIC, json!({}), 0.0);
    let mut missing = Vec::new();
    for gate in &GATES {
        let on = is_on(gate, minor, &reported);
        output.set_gauge(
            METRIC_GROUP,
            GATE_METRIC,
            json!({"gate": gate.name}),
            if on { 1.0 } else { 0.0 },
        );
        if !on {
            missing.push(gate.name);
            let message = format!(
                "Kubernetes {version}: feature gate {} is off, so {}. Turn it on in the ModuleConfig \
                 control-plane-manager (spec.settings.enabledFeatureGates).",
                gate.name, gate.without_it
            );
            let event = warning_event(
                &Regarding::module(MODULE_KEY),
                gate.name,
                "FeatureGateOff",
                &message,
                now,
            );
            output.kubernetes_patch.push(create_or_update(event));
        }
    }
    output.set_value(
        "internal/kubernetes",
        json!({"featureGates": enabled_gates(&reported, minor), "missingFeatureGates": missing}),
    );
    Ok(output)
}

/// The DRA gates (and ResourceHealthStatus) the server has on, sorted: reported on, or locked on by
/// its version.
fn enabled_gates(reported: &BTreeMap<String, bool>, minor: u32) -> Vec<String> {
    let mut gates: Vec<String> = reported
        .iter()
        .filter(|(name, on)| **on && (name.starts_with("DRA") || *name == "ResourceHealthStatus"))
        .map(|(name, _)| name.clone())
        .collect();
    gates.extend(
        GATES
            .iter()
            .filter(|g| is_on(g, minor, reported))
            .map(|g| g.name.to_owned()),
    );
    gates.sort();
    gates.dedup();
    gates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(version: &str) -> HookInput {
        HookInput::from_parts(
            &json!([]),
            json!({"global": {"discovery": {"kubernetesVersion": version}}}),
        )
        .unwrap()
    }

    const METRICS_134: &str = "kubernetes_feature_enabled{name=\"DRAPartitionableDevices\",stage=\"ALPHA\"} 1\n\
        kubernetes_feature_enabled{name=\"DRAConsumableCapacity\",stage=\"ALPHA\"} 1\n\
        kubernetes_feature_enabled{name=\"DRAExtendedResource\",stage=\"ALPHA\"} 0\n\
        kubernetes_feature_enabled{name=\"DRADeviceTaints\",stage=\"ALPHA\"} 0\n\
        kubernetes_feature_enabled{name=\"ResourceHealthStatus\",stage=\"ALPHA\"} 1\n\
        kubernetes_feature_enabled{name=\"AllAlpha\",stage=\"ALPHA\"} 1\n";

    #[test]
    fn a_gate_that_is_off_is_in_values_metrics_and_an_event() {
        let now = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let out = report(&input("1.34.4"), METRICS_134, now).unwrap();
        let values = &out.values_patch[0]["value"];
        assert_eq!(
            values["missingFeatureGates"],
            json!(["DRAExtendedResource", "DRADeviceTaints"])
        );
        assert_eq!(
            values["featureGates"],
            json!([
                "DRAConsumableCapacity",
                "DRAPartitionableDevices",
                "ResourceHealthStatus"
            ])
        );
        let off: Vec<&Value> = out
            .metrics
            .iter()
            .filter(|m| m["name"] == GATE_METRIC && m["value"] == 0.0)
            .collect();
        assert_eq!(off.len(), 2);
        assert_eq!(off[0]["labels"]["gate"], "DRAExtendedResource");
        let event = &out.kubernetes_patch[0]["object"];
        assert_eq!(event["metadata"]["name"], "module.gpu.draextendedresource");
        assert_eq!(event["involvedObject"]["kind"], "Module");
        assert!(event["message"].as_str().unwrap().contains("stay Pending"));
    }

    #[test]
    fn a_newer_release_has_the_graduated_gates_on_without_reporting_them() {
        let metrics = "kubernetes_feature_enabled{name=\"DRAPartitionableDevices\",stage=\"BETA\"} 1\n\
            kubernetes_feature_enabled{name=\"DRAConsumableCapacity\",stage=\"BETA\"} 1\n\
            kubernetes_feature_enabled{name=\"ResourceHealthStatus\",stage=\"BETA\"} 1\n";
        let out = report(&input("1.37.2"), metrics, OffsetDateTime::UNIX_EPOCH).unwrap();
        assert_eq!(out.values_patch[0]["value"]["missingFeatureGates"], json!([]));
        assert!(out.kubernetes_patch.is_empty());
        assert!(
            out.metrics
                .iter()
                .filter(|m| m["name"] == GATE_METRIC)
                .all(|m| m["value"] == 1.0)
        );
        let unknown = out.metrics.iter().find(|m| m["name"] == UNKNOWN_METRIC).unwrap();
        assert_eq!(unknown["value"], 0.0, "a good read clears the unknown gauge");
    }

    #[test]
    fn without_the_version_the_hook_fails_and_says_why() {
        let empty = HookInput::from_parts(&json!([]), json!({})).unwrap();
        let error = report(&empty, METRICS_134, OffsetDateTime::UNIX_EPOCH).unwrap_err();
        assert!(error.to_string().contains("kubernetesVersion"), "{error}");
    }
}
