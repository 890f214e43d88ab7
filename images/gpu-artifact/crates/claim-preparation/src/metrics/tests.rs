use std::collections::BTreeMap;
use std::time::Duration;

use dra_offers::OfferedDevice;
use gpu_vendor::MigPlacement;
use node_prepare::{CheckpointClaim, CheckpointDevice, ClaimState, MigInstanceRecord};
use prometheus_client::registry::Registry;

use super::*;

fn metrics() -> (ClaimMetrics, Registry) {
    let mut registry = Registry::default();
    let (metrics, _node_pods) = ClaimMetrics::register(&mut registry);
    (metrics, registry)
}

fn text(registry: &Registry) -> String {
    component_base::metrics_text(registry).unwrap()
}

fn device(name: &str, target: OfferedDevice, mig_instance: Option<MigInstanceRecord>) -> CheckpointDevice {
    CheckpointDevice {
        request: "gpu".into(),
        pool: "gpus/w1".into(),
        device: name.into(),
        share_id: None,
        target,
        cdi_device_ids: vec![],
        mig_instance,
        mig_create_attempted: false,
        sharing: None,
        vfio: None,
        admin_access: false,
    }
}

fn claim(name: &str, state: ClaimState, devices: Vec<CheckpointDevice>) -> CheckpointClaim {
    CheckpointClaim {
        namespace: "ml".into(),
        name: name.into(),
        state,
        devices,
    }
}

#[test]
fn operations_are_counted_by_result_and_reason_and_timed() {
    let (metrics, registry) = metrics();
    metrics.record(ClaimOperation::Prepare, Duration::from_millis(300), None);
    metrics.record(
        ClaimOperation::Prepare,
        Duration::from_secs(3),
        Some(FailureReason::VendorCall),
    );
    metrics.record(
        ClaimOperation::Prepare,
        Duration::from_secs(4),
        Some(FailureReason::VendorCall),
    );
    metrics.record(ClaimOperation::Unprepare, Duration::from_millis(20), None);
    let text = text(&registry);
    for line in [
        r#"gpu_handler_claim_operations_total{operation="prepare",result="success",reason=""} 1"#,
        r#"gpu_handler_claim_operations_total{operation="prepare",result="failure",reason="VendorCall"} 2"#,
        r#"gpu_handler_claim_operations_total{operation="unprepare",result="success",reason=""} 1"#,
        r#"gpu_handler_claim_operation_duration_seconds_count{operation="prepare"} 3"#,
        r#"gpu_handler_claim_operation_duration_seconds_sum{operation="prepare"} 7.3"#,
        r#"gpu_handler_claim_operation_duration_seconds_bucket{le="0.5",operation="prepare"} 1"#,
        r#"gpu_handler_claim_operation_duration_seconds_bucket{le="5.0",operation="prepare"} 3"#,
        r#"gpu_handler_claim_operation_duration_seconds_count{operation="unprepare"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}

#[test]
fn the_checkpoint_sets_prepared_claims_and_the_cards_they_hold() {
    let (metrics, registry) = metrics();
    let card = "0000:01:00.0".parse().unwrap();
    let whole = OfferedDevice::Physical {
        pci_address: "0000:41:00.0".parse().unwrap(),
        uuid: "GPU-bbbb".into(),
        physical_gpu: "w1-1-10de-20b7".into(),
    };
    let mig = OfferedDevice::Mig {
        pci_address: card,
        parent_uuid: "GPU-aaaa".into(),
        physical_gpu: "w1-0-10de-20b7".into(),
        profile_id: 14,
        profile_name: "2g.12gb".into(),
        placement: MigPlacement { start: 0, size: 2 },
    };
    let instance = MigInstanceRecord {
        gpu_instance_id: 5,
        compute_instance_id: 0,
        uuid: "MIG-cccc".into(),
    };
    let claims = BTreeMap::from([
        (
            "uid-a".to_owned(),
            claim(
                "train",
                ClaimState::PrepareCompleted,
                vec![device("gpu0-mig-2g12gb-0", mig, Some(instance))],
            ),
        ),
        (
            "uid-b".to_owned(),
            claim(
                "infer",
                ClaimState::PrepareCompleted,
                vec![device("gpu1", whole.clone(), None)],
            ),
        ),
        (
            "uid-c".to_owned(),
            claim(
                "half-done",
                ClaimState::PrepareStarted,
                vec![device("gpu1", whole, None)],
            ),
        ),
    ]);
    metrics.set_checkpoint(&claims);
    let body = text(&registry);
    assert!(body.contains("gpu_handler_prepared_claims 2\n"), "{body}");
    assert!(
        body.contains(r#"gpu_handler_prepared_device_info{claim_namespace="ml",claim="train",device="gpu0-mig-2g12gb-0",physicalgpu="w1-0-10de-20b7",UUID="GPU-aaaa",GPU_I_ID="5",MIG_UUID="MIG-cccc"} 1"#),
        "{body}"
    );
    assert!(
        body.contains(r#"gpu_handler_prepared_device_info{claim_namespace="ml",claim="infer",device="gpu1",physicalgpu="w1-1-10de-20b7",UUID="GPU-bbbb",GPU_I_ID="",MIG_UUID=""} 1"#),
        "{body}"
    );
    assert!(!body.contains("half-done"), "a started claim is not prepared: {body}");

    metrics.set_checkpoint(&BTreeMap::new());
    let body = text(&registry);
    assert!(body.contains("gpu_handler_prepared_claims 0\n"), "{body}");
    assert!(
        !body.contains("claim=\"train\""),
        "unprepared claims leave no series: {body}"
    );
}

#[test]
fn prepare_failures_are_counted_by_the_kinds_of_device_the_claim_holds_here() {
    let (metrics, registry) = metrics();
    let card = "0000:01:00.0".parse().unwrap();
    let catalog = dra_offers::DeviceCatalog::from([
        (
            "gpu0".to_owned(),
            OfferedDevice::Physical {
                pci_address: card,
                uuid: "GPU-a".into(),
                physical_gpu: "w1-0-10de-20b7".into(),
            },
        ),
        (
            "gpu0-mig-1g6gb-0".to_owned(),
            OfferedDevice::Mig {
                pci_address: card,
                parent_uuid: "GPU-a".into(),
                physical_gpu: "w1-0-10de-20b7".into(),
                profile_id: 0,
                profile_name: "1g.6gb".into(),
                placement: MigPlacement { start: 0, size: 1 },
            },
        ),
    ]);
    let claim: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "c", "namespace": "ml"},
        "spec": {},
        "status": {"allocation": {"devices": {"results": [
            {"request": "a", "driver": "gpu.deckhouse.io", "pool": "gpus/w1", "device": "gpu0-mig-1g6gb-0"},
            {"request": "b", "driver": "gpu.deckhouse.io", "pool": "gpus/w1", "device": "gpu0-mig-1g6gb-0"},
            {"request": "c", "driver": "gpu.deckhouse.io", "pool": "gpus/w1", "device": "gone"},
            {"request": "d", "driver": "other.example.com", "pool": "gpus/w1", "device": "gpu0"}]}}}
    }))
    .unwrap();
    let kinds = device_kinds(Some(&claim), "gpu.deckhouse.io", "gpus/w1", &catalog);
    let pair = |t: &str, v: &str| (t.to_owned(), v.to_owned());
    assert_eq!(kinds, [pair("MIG", "nvidia"), pair("unknown", "unknown")]);
    metrics.count_prepare_failure(FailureReason::VendorCall, &kinds);
    let unread = device_kinds(None, "gpu.deckhouse.io", "gpus/w1", &catalog);
    metrics.count_prepare_failure(FailureReason::ClaimNotRead, &unread);
    let text = text(&registry);
    for line in [
        r#"gpu_dra_prepare_failures_total{reason="VendorCall",deviceType="MIG",vendor="nvidia"} 1"#,
        r#"gpu_dra_prepare_failures_total{reason="VendorCall",deviceType="unknown",vendor="unknown"} 1"#,
        r#"gpu_dra_prepare_failures_total{reason="ClaimNotRead",deviceType="unknown",vendor="unknown"} 1"#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
