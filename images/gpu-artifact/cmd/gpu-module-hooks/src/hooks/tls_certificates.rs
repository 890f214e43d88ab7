//! tls-certificates: the module's root CA, the serving certificate of every kube-rbac-proxy
//! sidecar and that of gpu-dra-controller's admission webhook, into `internal.rootCA`,
//! `internal.metrics.cert` and `internal.admissionWebhook.cert`. What the Secrets rendered from them
//! hold is kept across runs; a certificate is made anew when it is missing, does not parse, nears its
//! expiry, names other hosts than wanted (e.g. the cluster domain changed), or when the CA is new.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::certificates::{PemPair, ca_is_current, leaf_is_current, new_root_ca, new_serving_certificate};
use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput, QUEUE, snapshot_binding};

const BINDING: &str = "secrets";
pub const ROOT_CA_SECRET: &str = "gpu-root-ca";
pub const METRICS_SECRET: &str = "gpu-metrics-tls";
pub const WEBHOOK_SECRET: &str = "gpu-dra-controller-webhook-tls";
const JQ_FILTER: &str =
    r#"{"name": .metadata.name, "ca": .data."ca.crt", "crt": .data."tls.crt", "key": .data."tls.key"}"#;
/// The Services whose names clients use to reach a kube-rbac-proxy.
const SERVICES: [&str; 1] = ["gpu-controller-metrics"];
/// The Service the API server calls the admission webhook by.
pub const WEBHOOK_SERVICE: &str = "gpu-dra-controller-webhook";

/// A serving certificate the hook keeps: its Secret, common name, Services and values path.
struct Leaf {
    secret: &'static str,
    common_name: &'static str,
    services: &'static [&'static str],
    value: &'static str,
}

const LEAVES: [Leaf; 2] = [
    Leaf {
        secret: METRICS_SECRET,
        common_name: "gpu-metrics",
        services: &SERVICES,
        value: "internal/metrics/cert",
    },
    Leaf {
        secret: WEBHOOK_SECRET,
        common_name: WEBHOOK_SERVICE,
        services: &[WEBHOOK_SERVICE],
        value: "internal/admissionWebhook/cert",
    },
];

pub fn config() -> HookConfig {
    let mut secrets = snapshot_binding(BINDING, "v1", "Secret", JQ_FILTER, false);
    if let Some(binding) = secrets.as_object_mut() {
        binding.insert(
            "nameSelector".into(),
            json!({"matchNames": [ROOT_CA_SECRET, METRICS_SECRET, WEBHOOK_SECRET]}),
        );
        binding.insert("namespace".into(), json!({"nameSelector": {"matchNames": ["d8-gpu"]}}));
    }
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "tls-certificates",
            path: "gpu/tls-certificates",
        },
        before_helm: Some(5),
        // Daily, so a certificate is renewed well before it expires even when nothing else happens.
        schedule: vec![json!({"name": "renew", "crontab": "42 4 * * *", "queue": QUEUE})],
        kubernetes: vec![secrets],
        ..HookConfig::default()
    }
}

/// Loopback and every name of `services` in d8-gpu, for `cluster_domain`.
fn service_hosts(services: &[&str], cluster_domain: &str) -> Vec<String> {
    let mut hosts = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    for service in services {
        hosts.push((*service).to_owned());
        hosts.push(format!("{service}.d8-gpu"));
        hosts.push(format!("{service}.d8-gpu.svc"));
        hosts.push(format!("{service}.d8-gpu.svc.{cluster_domain}"));
    }
    hosts
}

pub fn run(input: &HookInput) -> anyhow::Result<HookOutput> {
    let now = OffsetDateTime::now_utc();
    let cluster_domain = input
        .value("/global/discovery/clusterDomain")
        .and_then(Value::as_str)
        .unwrap_or("cluster.local");
    let stored_ca = stored(input, ROOT_CA_SECRET);
    let ca = match stored_ca {
        Some((pair, _)) if ca_is_current(&pair, now) => pair,
        _ => new_root_ca("d8-gpu-root-ca", now)?,
    };
    let mut output = HookOutput::default();
    output.set_value("internal/rootCA", json!({"crt": ca.crt, "key": ca.key}));
    for wanted in &LEAVES {
        let hosts = service_hosts(wanted.services, cluster_domain);
        let leaf = match stored(input, wanted.secret) {
            Some((pair, issued_by)) if issued_by == ca.crt && leaf_is_current(&pair, &ca, &hosts, now) => pair,
            _ => new_serving_certificate(&ca, wanted.common_name, &hosts, now)?,
        };
        output.set_value(wanted.value, json!({"ca": ca.crt, "crt": leaf.crt, "key": leaf.key}));
    }
    Ok(output)
}

/// The certificate, key and `ca.crt` a Secret of the snapshot holds, decoded.
fn stored(input: &HookInput, secret: &str) -> Option<(PemPair, String)> {
    let item = input
        .snapshot(BINDING)
        .iter()
        .find(|s| s.get("name").and_then(Value::as_str) == Some(secret))?;
    let field = |name: &str| -> Option<String> {
        let encoded = item.get(name)?.as_str()?;
        String::from_utf8(STANDARD.decode(encoded).ok()?).ok()
    };
    Some((
        PemPair {
            crt: field("crt")?,
            key: field("key")?,
        },
        field("ca").unwrap_or_default(),
    ))
}
