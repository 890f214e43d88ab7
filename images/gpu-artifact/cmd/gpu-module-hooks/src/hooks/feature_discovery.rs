//! feature-discovery: what the API server can do, for templates that render DRA parts only where they
//! work. The server's version from `/version`, and its enabled DRA feature gates from the
//! `kubernetes_feature_enabled` series of its `/metrics`.

use anyhow::Context;
use kube::Client;
use serde_json::json;

use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput};

pub fn config() -> HookConfig {
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "feature-discovery",
            path: "gpu/feature-discovery",
        },
        before_helm: Some(1),
        ..HookConfig::default()
    }
}

pub async fn run(_input: HookInput) -> anyhow::Result<HookOutput> {
    let client = Client::try_default().await?;
    let version = client.apiserver_version().await.context("GET /version")?;
    let metrics = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await
        .context("GET /metrics of the API server")?;
    let mut output = HookOutput::default();
    output.set_value(
        "internal/kubernetes",
        json!({"serverVersion": server_version(&version.git_version), "featureGates": dra_gates_enabled(&metrics)}),
    );
    Ok(output)
}

/// `v1.34.4` -> `1.34.4`; build metadata and pre-release suffixes are dropped (`v1.37.2+k3s1` -> `1.37.2`).
pub fn server_version(git_version: &str) -> String {
    let version = git_version.trim_start_matches('v');
    version.split(['+', '-']).next().unwrap_or(version).to_owned()
}

/// Names of the `DRA*` gates whose `kubernetes_feature_enabled` sample is 1, sorted.
pub fn dra_gates_enabled(metrics: &str) -> Vec<String> {
    let mut gates: Vec<String> = metrics
        .lines()
        .filter_map(|line| line.strip_prefix("kubernetes_feature_enabled{"))
        .filter_map(|rest| {
            let (labels, value) = rest.rsplit_once('}')?;
            let enabled = value.trim().parse::<f64>().ok()? == 1.0;
            let name = labels
                .split(',')
                .find_map(|label| label.trim().strip_prefix("name=\""))?
                .trim_end_matches('"');
            (enabled && name.starts_with("DRA")).then(|| name.to_owned())
        })
        .collect();
    gates.sort();
    gates.dedup();
    gates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_lose_the_v_and_any_suffix() {
        assert_eq!(server_version("v1.34.4"), "1.34.4");
        assert_eq!(server_version("v1.37.2+k3s1"), "1.37.2");
        assert_eq!(server_version("v1.35.0-rc.1"), "1.35.0");
    }

    #[test]
    fn only_enabled_dra_gates_are_kept() {
        let metrics = "# HELP kubernetes_feature_enabled ...\n\
            kubernetes_feature_enabled{name=\"DRAPartitionableDevices\",stage=\"ALPHA\"} 1\n\
            kubernetes_feature_enabled{name=\"DRAConsumableCapacity\",stage=\"ALPHA\"} 0\n\
            kubernetes_feature_enabled{name=\"DRAExtendedResource\",stage=\"ALPHA\"} 1\n\
            kubernetes_feature_enabled{name=\"AllAlpha\",stage=\"ALPHA\"} 1\n\
            apiserver_request_total{code=\"200\"} 12\n";
        assert_eq!(
            dra_gates_enabled(metrics),
            vec!["DRAExtendedResource", "DRAPartitionableDevices"]
        );
    }
}
