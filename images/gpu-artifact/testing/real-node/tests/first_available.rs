//! Prioritized lists (`firstAvailable`) through the real node: a claim whose first subrequest
//! cannot be met (a card the node does not have) runs on its second, and the config the claim
//! gives that subrequest by the name `<request>/<subrequest>` is the one the node applies: its MPS
//! `defaultActiveThreadPercentage` reaches the container, not the share's sharePercent and not the
//! first subrequest's config. Once through the kube-scheduler (a `FirstFit` class: the Pod is not
//! gated) and once through gpu-dra-controller (the `BestFit` class `gpu-mps` of docs/examples).
//!
//! Upstream names a subrequest's result `<main request>/<subrequest>` and lets a config name it so
//! (k8s.io/api resource/v1: DeviceRequestAllocationResult.Request, DeviceClaimConfiguration.Requests).

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::json;
use support::module::wait_module_ready;
use support::*;

const SELECT: &str = "device.attributes[\"gpu.deckhouse.io\"].device == ";
const FIRST_FIT_CLASS: &str = "rn-mps-first-fit";

/// Claim `name` of `class`: first a B200 share (none on the node), else half of an H100 through
/// MPS; each subrequest with a config of its own, naming it `gpu/<subrequest>`.
async fn prioritized_claim(client: &kube::Client, ns: &str, name: &str, class: &str) {
    let share = |device: &str| {
        json!({"deviceClassName": class, "selectors": [{"cel": {"expression": format!("{SELECT}\"{device}\"")}}],
            "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": "50"}}})
    };
    let mut b200 = share("b200");
    b200["name"] = json!("b200");
    let mut h100 = share("h100-sxm5-80gb");
    h100["name"] = json!("h100");
    let mps = |percent: u32| {
        json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig",
            "sharing": {"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": percent}}})
    };
    let config = |request: &str, percent: u32| json!({"requests": [request], "opaque": {"driver": "gpu.deckhouse.io", "parameters": mps(percent)}});
    apply(
        client,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {
                "requests": [{"name": "gpu", "firstAvailable": [b200, h100]}],
                "config": [config("gpu/b200", 70), config("gpu/h100", 30)]}}}),
    )
    .await;
}

/// Runs a Pod of the prioritized claim of `class` and checks who allocated it (`gated`: the
/// webhook gave the Pod our scheduling gate, so gpu-dra-controller did) and what the node gave it.
async fn runs_on_the_second_with_its_config(test: &str, class: &str, gated: bool) {
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    apply(
        &client,
        &json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": &node.name, "labels": {"gpu.deckhouse.io/allow-mps": "true"}}}),
    )
    .await;
    let ns = namespace(&client, test).await;
    prioritized_claim(&client, &ns, "prioritized", class).await;
    let pod = workload_pod("prioritized", SHOW_GPUS, &[("gpu", "prioritized")], &[]);
    create_pod(&client, &ns, &pod).await;
    let admitted = Api::<Pod>::namespaced(client.clone(), &ns)
        .get("prioritized")
        .await
        .unwrap();
    let gates: Vec<String> = admitted
        .spec
        .unwrap()
        .scheduling_gates
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.name)
        .collect();
    assert_eq!(
        gates.contains(&"gpu.deckhouse.io/allocation".to_owned()),
        gated,
        "{gates:?}"
    );
    let results = allocation_results(&client, &ns, "prioritized").await;
    let given = allocated_uuids(&client, &ns, "prioritized").await;
    let out = finish_run(&client, &ns, "prioritized").await;

    let requests: Vec<&str> = results.iter().map(|r| r.request.as_str()).collect();
    assert_eq!(requests, ["gpu/h100"], "the second subrequest was chosen");
    assert!(given[0].0.ends_with("-mps"), "an MPS share: {given:?}");
    let gpus = gpu_lines(&out);
    assert_eq!(gpus.len(), 1, "{out}");
    assert!(gpus[0].contains("H100") && gpus[0].contains(&given[0].1), "{out}");
    let env = section(&out, "env");
    assert!(
        env.contains(&"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30"),
        "the config of gpu/h100 applies (not sharePercent 50, not gpu/b200's 70): {env:?}"
    );
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn through_the_kube_scheduler_a_prioritized_claim_runs_on_its_second_subrequest() {
    let _cards = CARDS.lock().await;
    let (_, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    let class = json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUClass",
        "metadata": {"name": FIRST_FIT_CLASS},
        "spec": {"vendor": "Nvidia", "deviceType": "Physical", "sharing": {"strategy": "MPS"},
            "allocationPolicy": "FirstFit"}});
    apply(&client, &class).await;
    wait_device_class(&client, FIRST_FIT_CLASS).await;
    runs_on_the_second_with_its_config("prio-first-fit", FIRST_FIT_CLASS, false).await;
    delete_object(&client, &class).await;
}

#[tokio::test]
async fn through_gpu_dra_controller_a_prioritized_claim_runs_on_its_second_subrequest() {
    let _cards = CARDS.lock().await;
    runs_on_the_second_with_its_config("prio-best-fit", "gpu-mps", true).await;
}
