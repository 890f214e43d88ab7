//! gpu-dra-controller with its mutating webhook `allocation-gate.gpu.deckhouse.io` served over TLS
//! on loopback, registered with the real API server for one test namespace (the chart registers it
//! for every namespace but `kube-system` and `d8-*`), so Pods created there are gated at admission
//! as in a cluster.

use std::path::Path;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use kube::Api;
use serde_json::json;
use testbed::{ComponentProcess, TestNamespace};

use super::components::{AgentWorkspace, dra_controller_rules, kubeconfig_with_lease, reserve_port, wait_ready};
use super::create;

/// A self-signed certificate for 127.0.0.1 in `dir` (tls.crt, tls.key), and its PEM base64-encoded
/// (a webhook's `caBundle`).
pub fn loopback_certificate(dir: &Path) -> String {
    let run = |args: &[&str]| {
        let out = std::process::Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    run(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-keyout",
        "tls.key",
        "-out",
        "tls.crt",
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
    ]);
    run(&["base64", "-A", "-in", "tls.crt"])
}

/// The webhook of gpu-dra-controller listening on `port`, for Pods of `ns` only.
pub fn gate_webhook(ns: &TestNamespace, port: u16, ca_bundle: &str) -> MutatingWebhookConfiguration {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": ns.unique("allocation-gate"), "labels": ns.owner_labels()},
        "webhooks": [{
            "name": "allocation-gate.gpu.deckhouse.io", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/mutate-pods"), "caBundle": ca_bundle},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name()}},
            "failurePolicy": "Ignore", "sideEffects": "None", "timeoutSeconds": 3}]
    }))
    .unwrap()
}

/// gpu-dra-controller under its RBAC, serving its webhook with a certificate of the workspace, and
/// the webhook registered; returns the process and the registered configuration.
pub async fn start_gating_controller(
    ns: &TestNamespace,
    ws: &AgentWorkspace,
) -> (ComponentProcess, MutatingWebhookConfiguration) {
    let ca_bundle = loopback_certificate(ws.dir.path());
    let kubeconfig = kubeconfig_with_lease(ns, "gpu-dra-controller", dra_controller_rules(), ws.dir.path()).await;
    let (health, admission) = (reserve_port(), reserve_port());
    let (health_port, admission_port) = (health.number(), admission.number());
    let env = [
        ("KUBECONFIG", kubeconfig.display().to_string()),
        ("POD_NAMESPACE", ns.name().to_owned()),
        ("POD_NAME", "gpu-dra-controller-0".to_owned()),
        ("HEALTH_ADDR", format!("127.0.0.1:{health_port}")),
        ("WEBHOOK_ADDR", format!("127.0.0.1:{admission_port}")),
        ("WEBHOOK_CERT_DIR", ws.dir.path().display().to_string()),
        ("LOG_LEVEL", "Debug".to_owned()),
    ];
    let controller = ComponentProcess::start("gpu-dra-controller", &env, &ws.logs())
        .unwrap()
        .holding(health)
        .holding(admission);
    wait_ready(health_port, &controller).await;
    let webhooks = Api::<MutatingWebhookConfiguration>::all(ns.client());
    let config = create(&webhooks, &gate_webhook(ns, admission_port, &ca_bundle)).await;
    (controller, config)
}
