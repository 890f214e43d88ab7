//! Opaque configs of our driver are refused when a claim or template is written (issue 31,
//! item 7): the chart's ValidatingAdmissionPolicy `d8-gpu-opaque-config`, as `helm` renders it, on
//! the real API server. A config for `gpu.deckhouse.io` with an unknown apiVersion or kind, none,
//! or a field its kind does not have is refused with the words gpu-handler would use when it
//! prepares the claim (`OpaqueConfig::decode`, compared here), naming the object and the config;
//! a good config, and another driver's, are accepted.

mod support;

use gpu_api::opaque_config::OpaqueConfig;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use support::policies::{install_rendered_policies, refused, until_refused};
use testbed::TestNamespace;

const OURS: &str = "gpu.deckhouse.io";

fn devices(configs: &[(&str, Value)]) -> Value {
    let configs: Vec<Value> = configs
        .iter()
        .map(
            |(driver, parameters)| json!({"requests": ["gpu"], "opaque": {"driver": driver, "parameters": parameters}}),
        )
        .collect();
    json!({"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}], "config": configs})
}

fn claim(name: &str, configs: &[(&str, Value)]) -> ResourceClaim {
    serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name}, "spec": {"devices": devices(configs)}}))
    .unwrap()
}

fn template(name: &str, configs: &[(&str, Value)]) -> ResourceClaimTemplate {
    serde_json::from_value(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name}, "spec": {"spec": {"devices": devices(configs)}}}),
    )
    .unwrap()
}

/// What gpu-handler says of `parameters` when it prepares a claim.
fn node_words(parameters: &Value) -> String {
    OpaqueConfig::decode(parameters).unwrap_err().to_string()
}

fn nvidia() -> Value {
    json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_refuses_a_config_of_ours_the_node_would_refuse() {
    let ns = TestNamespace::create("opaque-config").await.unwrap();
    let installed = install_rendered_policies(&ns, "opaque-config").await;
    assert_eq!(installed, 1, "the chart renders one policy (its binding has its name)");
    let claims = ns.api::<ResourceClaim>();
    let templates = ns.api::<ResourceClaimTemplate>();
    let create = PostParams::default();

    let foreign = json!({"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig"});
    until_refused("the opaque-config policy", "is not allowed", || async {
        claims
            .create(&create, &claim("probe", &[(OURS, foreign.clone())]))
            .await?;
        claims.delete("probe", &DeleteParams::default()).await?;
        Ok(())
    })
    .await;

    let cases = [
        ("another driver's apiVersion", nvidia()),
        ("no apiVersion", json!({"kind": "GpuConfig"})),
        (
            "an apiVersion that is no string",
            json!({"apiVersion": 1, "kind": "GpuConfig"}),
        ),
        ("no kind", json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1"})),
        (
            "an unknown kind",
            json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "GpuCfg"}),
        ),
        (
            "a misspelt field",
            json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig", "sharring": {}}),
        ),
        (
            "a field VFIO does not have",
            json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "VfioDeviceConfig", "sharing": {}}),
        ),
    ];
    for (index, (what, parameters)) in cases.iter().enumerate() {
        let words = node_words(parameters);
        // Behind another driver's config: the message names the config's place.
        let name = format!("bad-{index}");
        let result = claims
            .create(
                &create,
                &claim(&name, &[("gpu.nvidia.com", nvidia()), (OURS, parameters.clone())]),
            )
            .await;
        let says = format!("ResourceClaim {name}: config 1 of spec.devices.config: {words}");
        refused(result, what, &says);
        let result = templates
            .create(&create, &template(&name, &[(OURS, parameters.clone())]))
            .await;
        let says = format!("ResourceClaimTemplate {name}: config 0 of spec.spec.devices.config: {words}");
        refused(result, what, &says);
    }

    let good = json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig",
        "sharing": {"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}}});
    OpaqueConfig::decode(&good).expect("the node takes it");
    let accepted = [("gpu.nvidia.com", nvidia()), (OURS, good)];
    claims.create(&create, &claim("good", &accepted)).await.unwrap();
    templates.create(&create, &template("good", &accepted)).await.unwrap();
    claims.create(&create, &claim("plain", &[])).await.unwrap();
}
