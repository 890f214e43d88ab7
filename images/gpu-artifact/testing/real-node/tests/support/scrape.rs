//! A module component's metrics, scraped the way Prometheus does.

use std::time::Duration;

use kube::api::PostParams;
use kube::{Api, Client};
use real_node::node::RealNode;
use serde_json::json;
use testbed::{Progress, wait_until};

use super::{MODULE_NAMESPACE, apply};

/// `/metrics` of a module component through its kube-rbac-proxy sidecar, as Prometheus reads it:
/// HTTPS on the Pod's address inside the node's network, with the token of a ServiceAccount that
/// may `get` the workload's `prometheus-metrics` subresource (and nothing else).
pub async fn scrape(
    node: &RealNode,
    client: &Client,
    test_ns: &str,
    pod_ip: &str,
    port: u16,
    resource: &str,
    name: &str,
) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    let account = format!("scraper-{name}");
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": test_ns}}),
    )
    .await;
    apply(
        client,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{test_ns}-{name}"), "namespace": MODULE_NAMESPACE},
        "rules": [{"apiGroups": ["apps"], "resources": [format!("{resource}/prometheus-metrics")],
                   "resourceNames": [name], "verbs": ["get"]}]}),
    )
    .await;
    apply(
        client,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{test_ns}-{name}"), "namespace": MODULE_NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{test_ns}-{name}")},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": test_ns}]}),
    )
    .await;
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}})).unwrap();
    let token = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), test_ns)
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .expect("a token for the scraper")
        .status
        .unwrap()
        .token;
    let url = format!("https://{pod_ip}:{port}/metrics");
    wait_until(&format!("{url} answering the scraper"), Duration::from_secs(60), || {
        let out = node.exec(&[
            "curl",
            "-sk",
            "--max-time",
            "5",
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-w",
            "\n%{http_code}",
            &url,
        ]);
        async move {
            let out = out?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok(match text.rsplit_once('\n') {
                Some((body, "200")) => Progress::Done(body.to_owned()),
                _ => Progress::Pending(format!("{text} {}", String::from_utf8_lossy(&out.stderr))),
            })
        }
    })
    .await
    .unwrap()
}

/// The value of one sample line `name value` of a scrape.
pub fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}
