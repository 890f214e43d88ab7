use serde_json::json;

use super::*;

fn prepared(claim: &str, request: &str, device: &str, mig: Option<(&str, &str)>) -> PreparedDevice {
    let (gpu_instance_id, mig_uuid) = mig.unwrap_or_default();
    PreparedDevice {
        namespace: "ml".into(),
        claim: claim.into(),
        request: request.into(),
        device: device.into(),
        physicalgpu: "w1-0-10de-2330".into(),
        uuid: "GPU-aaaa".into(),
        gpu_instance_id: gpu_instance_id.into(),
        mig_uuid: mig_uuid.into(),
    }
}

fn pod(value: serde_json::Value) -> Arc<Pod> {
    Arc::new(serde_json::from_value(value).unwrap())
}

fn labels(pod: &str, container: &str, claim: &str, device: &str, mig: Option<(&str, &str)>) -> PodDeviceLabels {
    let (gpu_instance_id, mig_uuid) = mig.unwrap_or_default();
    PodDeviceLabels {
        namespace: "ml".into(),
        pod: pod.into(),
        container: container.into(),
        claim: claim.into(),
        device: device.into(),
        physicalgpu: "w1-0-10de-2330".into(),
        UUID: "GPU-aaaa".into(),
        GPU_I_ID: gpu_instance_id.into(),
        MIG_UUID: mig_uuid.into(),
    }
}

#[test]
fn a_template_claim_is_attributed_to_the_containers_that_use_its_request() {
    let mig = Some(("3", "MIG-1111"));
    let devices = [
        prepared("trainer-gpu-x7k", "gpu", "gpu0-mig-1g10gb-0", mig),
        prepared("trainer-gpu-x7k", "nic", "gpu1", None),
    ];
    let trainer = pod(json!({
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-mig"}],
            "initContainers": [{"name": "warmup", "resources": {"claims": [{"name": "gpu", "request": "gpu"}]}}],
            "containers": [
                {"name": "main", "resources": {"claims": [{"name": "gpu"}]}},
                {"name": "sidecar"}]},
        "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "trainer-gpu-x7k"}]}
    }));
    let elsewhere = pod(json!({
        "metadata": {"name": "trainer", "namespace": "other"},
        "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "trainer-gpu-x7k"}],
                 "containers": [{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]}
    }));
    assert_eq!(
        attribution(&devices, &[trainer, elsewhere]),
        [
            labels("trainer", "main", "trainer-gpu-x7k", "gpu0-mig-1g10gb-0", mig),
            labels("trainer", "main", "trainer-gpu-x7k", "gpu1", None),
            labels("trainer", "warmup", "trainer-gpu-x7k", "gpu0-mig-1g10gb-0", mig),
        ],
        "the init container names request gpu only; the sidecar uses nothing; a Pod of another namespace is not the claim's"
    );
}

#[test]
fn a_named_claim_and_an_extended_resource_claim_are_attributed_too() {
    let devices = [
        prepared("shared", "alt/big", "gpu0", None),
        prepared("scheduler-made", "container-0-request-0", "gpu0", None),
    ];
    let named = pod(json!({
        "metadata": {"name": "a", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "card", "resourceClaimName": "shared"}],
                 "containers": [{"name": "c", "resources": {"claims": [{"name": "card", "request": "alt"}]}}]}
    }));
    let extended = pod(json!({
        "metadata": {"name": "b", "namespace": "ml"},
        "spec": {"containers": [{"name": "cuda"}, {"name": "log"}]},
        "status": {"extendedResourceClaimStatus": {"resourceClaimName": "scheduler-made", "requestMappings": [
            {"containerName": "cuda", "resourceName": "gpu.deckhouse.io/h100", "requestName": "container-0-request-0"}]}}
    }));
    assert_eq!(
        attribution(&devices, &[named, extended]),
        [
            labels("a", "c", "shared", "gpu0", None),
            labels("b", "cuda", "scheduler-made", "gpu0", None),
        ],
        "a firstAvailable result answers its top request; the mapping names the container"
    );
}

#[test]
fn the_collector_serves_the_family_before_any_pod_and_the_series_once_one_uses_a_device() {
    let (collector, mut node_pods) = pod_devices();
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register_collector(Box::new(collector.clone()));
    let text = component_base::metrics_text(&registry).unwrap();
    assert!(text.contains("# TYPE gpu_handler_pod_device_info gauge"), "{text}");
    *collector.prepared.lock().unwrap() = vec![prepared("c", "gpu", "gpu0", None)];
    let user: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "c"}],
                 "containers": [{"name": "main", "resources": {"claims": [{"name": "g"}]}}]}
    }))
    .unwrap();
    node_pods.writer.apply_watcher_event(&watcher::Event::Apply(user));
    let text = component_base::metrics_text(&registry).unwrap();
    let line = r#"gpu_handler_pod_device_info{namespace="ml",pod="p",container="main",claim="c",device="gpu0",physicalgpu="w1-0-10de-2330",UUID="GPU-aaaa",GPU_I_ID="",MIG_UUID=""} 1"#;
    assert!(text.contains(line), "missing {line} in\n{text}");
}
