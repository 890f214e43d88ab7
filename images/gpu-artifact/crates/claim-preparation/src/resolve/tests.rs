//! `resolve_devices` on ResourceClaims shaped as the scheduler stores them: shares, configs from
//! class and claim, and the refusals a user sees on the claim.

use dra_offers::{DeviceCatalog, OfferedDevice};
use gpu_api::opaque_config::{
    GpuConfig, GpuSharing, MigDeviceConfig, OpaqueConfig, SharingStrategy, TimeSliceInterval, TimeSlicingConfig,
    VfioDeviceConfig,
};
use gpu_vendor::MigPlacement;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kubelet_plugin::ClaimRef;
use serde_json::{Value, json};

use super::{ResolveError, SHARE_PERCENT, resolve_devices};

const DRIVER: &str = "gpu.deckhouse.io";
const POOL: &str = "gpus/node-a";
const API_VERSION: &str = "resource.gpu.deckhouse.io/v1alpha1";

fn catalog() -> DeviceCatalog {
    let pci = "0000:01:00.0".parse().unwrap();
    let (uuid, physical_gpu) = ("GPU-1".to_owned(), "node-a-0-10de-20b7".to_owned());
    DeviceCatalog::from([
        (
            "gpu0".to_owned(),
            OfferedDevice::Physical {
                pci_address: pci,
                uuid: uuid.clone(),
                physical_gpu: physical_gpu.clone(),
            },
        ),
        (
            "gpu0-mps".to_owned(),
            OfferedDevice::SharedPhysical {
                pci_address: pci,
                uuid: uuid.clone(),
                physical_gpu: physical_gpu.clone(),
                strategy: SharingStrategy::Mps,
            },
        ),
        (
            "gpu0-mig-1g6gb-3".to_owned(),
            OfferedDevice::Mig {
                pci_address: pci,
                parent_uuid: uuid,
                physical_gpu,
                profile_id: 14,
                profile_name: "1g.6gb".into(),
                placement: MigPlacement { start: 3, size: 1 },
            },
        ),
    ])
}

/// Claim `default/train` with one allocated `device` for request `request`, and `configs` as
/// the scheduler copies them into the status.
fn claim(request: &str, device: &str, consumed: Option<Value>, configs: Value) -> ResourceClaim {
    let mut result = json!({"request": request, "driver": DRIVER, "pool": POOL, "device": device});
    if let Some(consumed) = consumed {
        result["shareID"] = json!("7d6c2c4e-1d3c-4b8e-9a51-0f1f6c3b2a10");
        result["consumedCapacity"] = consumed;
    }
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": "default", "name": "train", "uid": "uid-1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": [result], "config": configs}}},
    }))
    .expect("a valid ResourceClaim")
}

fn config(source: &str, requests: &[&str], parameters: Value) -> Value {
    json!({"source": source, "requests": requests, "opaque": {"driver": DRIVER, "parameters": parameters}})
}

fn gpu_config(sharing: Value) -> Value {
    json!({"apiVersion": API_VERSION, "kind": "GpuConfig", "sharing": sharing})
}

fn resolve(claim: &ResourceClaim) -> Result<Vec<node_prepare::AllocatedDevice>, ResolveError> {
    let asked = ClaimRef {
        namespace: "default".into(),
        name: "train".into(),
        uid: "uid-1".into(),
    };
    resolve_devices(&asked, claim, DRIVER, POOL, &catalog())
}

fn refusal(claim: &ResourceClaim) -> String {
    resolve(claim).expect_err("the claim is refused").to_string()
}

#[test]
fn a_share_carries_its_percent_and_no_config_when_none_applies() {
    let consumed = json!({SHARE_PERCENT: "30", "gpu.deckhouse.io/memory": "0"});
    let devices = resolve(&claim("gpu", "gpu0-mps", Some(consumed), json!([]))).unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].share_percent, Some(30));
    assert_eq!(
        devices[0].share_id.as_deref(),
        Some("7d6c2c4e-1d3c-4b8e-9a51-0f1f6c3b2a10")
    );
    assert_eq!(devices[0].config, None);
    assert_eq!(
        devices[0].share_memory_bytes, None,
        "a share that asked no memory has no limit"
    );
    let exclusive = resolve(&claim("gpu", "gpu0", None, json!([]))).unwrap();
    assert_eq!((exclusive[0].share_percent, exclusive[0].config.clone()), (None, None));
}

#[test]
fn a_share_carries_the_memory_it_consumed_in_bytes() {
    // The scheduler writes the amount rounded by the offer's policy (steps of 1 MiB), in whatever
    // form the quantity takes: a suffix, or plain bytes.
    for (written, bytes) in [("4Gi", 4u64 << 30), ("1536Mi", 1536 << 20), ("1073741824", 1 << 30)] {
        let consumed = json!({SHARE_PERCENT: "30", "gpu.deckhouse.io/memory": written});
        let devices = resolve(&claim("gpu", "gpu0-mps", Some(consumed), json!([]))).unwrap();
        assert_eq!(devices[0].share_memory_bytes, Some(bytes), "{written}");
    }
    let unqualified = json!({"sharePercent": "30", "memory": "2Gi"});
    let devices = resolve(&claim("gpu", "gpu0-mps", Some(unqualified), json!([]))).unwrap();
    assert_eq!(devices[0].share_memory_bytes, Some(2 << 30));
}

#[test]
fn the_claims_config_overrides_the_class_config_of_its_request() {
    let configs = json!([
        config("FromClass", &["gpu"], gpu_config(json!({"strategy": "Exclusive"}))),
        config(
            "FromClaim",
            &[],
            gpu_config(json!({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": 40}}))
        ),
        config(
            "FromClaim",
            &["other"],
            json!({"apiVersion": API_VERSION, "kind": "VfioDeviceConfig"})
        ),
    ]);
    let consumed = json!({SHARE_PERCENT: "50"});
    let devices = resolve(&claim("gpu", "gpu0-mps", Some(consumed), configs)).unwrap();
    let Some(OpaqueConfig::GpuConfig(GpuConfig { sharing: Some(sharing) })) = &devices[0].config else {
        panic!("a GpuConfig with sharing: {:?}", devices[0].config);
    };
    assert_eq!(sharing.strategy, SharingStrategy::Mps);
    assert_eq!(sharing.mps.as_ref().unwrap().default_active_thread_percentage, Some(40));
}

#[test]
fn class_configs_apply_to_an_exclusive_card_and_a_mig_device() {
    let time_slicing = gpu_config(json!({"strategy": "Exclusive"}));
    let devices = resolve(&claim(
        "gpu",
        "gpu0",
        None,
        json!([config("FromClass", &["gpu"], time_slicing)]),
    ))
    .unwrap();
    let expected = OpaqueConfig::GpuConfig(GpuConfig {
        sharing: Some(GpuSharing::default()),
    });
    assert_eq!(devices[0].config, Some(expected));
    let vfio = json!({"apiVersion": API_VERSION, "kind": "VfioDeviceConfig"});
    let devices = resolve(&claim(
        "gpu",
        "gpu0",
        None,
        json!([config("FromClaim", &["gpu"], vfio)]),
    ))
    .unwrap();
    assert_eq!(
        devices[0].config,
        Some(OpaqueConfig::VfioDeviceConfig(VfioDeviceConfig {}))
    );
    let mig = json!({"apiVersion": API_VERSION, "kind": "MigDeviceConfig"});
    let devices = resolve(&claim(
        "gpu/small",
        "gpu0-mig-1g6gb-3",
        None,
        json!([config("FromClass", &["gpu/small"], mig)]),
    ));
    assert_eq!(
        devices.unwrap()[0].config,
        Some(OpaqueConfig::MigDeviceConfig(MigDeviceConfig { sharing: None }))
    );
}

#[test]
fn a_broken_config_names_claim_request_device_and_field() {
    let bad = gpu_config(json!({"strategy": "TimeSlicing", "timeSlicing": {"interval": "Forever"}}));
    assert_eq!(
        refusal(&claim("gpu", "gpu0", None, json!([config("FromClaim", &[], bad)]))),
        "claim default/train: request gpu, device gpu0: config 0 of status.allocation.devices.config (FromClaim): \
         sharing.timeSlicing.interval: \"Forever\" is not allowed; allowed: Default, Short, Medium, Long"
    );
}

#[test]
fn a_config_of_the_wrong_kind_for_the_device_is_refused() {
    let mig = json!({"apiVersion": API_VERSION, "kind": "MigDeviceConfig"});
    assert_eq!(
        refusal(&claim("gpu", "gpu0", None, json!([config("FromClaim", &["gpu"], mig)]))),
        "claim default/train: request gpu: config MigDeviceConfig does not fit device gpu0: gpu0 is a whole card; \
         MigDeviceConfig applies to MIG devices, use GpuConfig"
    );
    let gpu = gpu_config(json!({}));
    assert_eq!(
        refusal(&claim(
            "gpu",
            "gpu0-mig-1g6gb-3",
            None,
            json!([config("FromClass", &["gpu"], gpu)])
        )),
        "claim default/train: request gpu: config GpuConfig does not fit device gpu0-mig-1g6gb-3: \
         gpu0-mig-1g6gb-3 is a MIG device; GpuConfig applies to whole cards, use MigDeviceConfig"
    );
    let vfio = json!({"apiVersion": API_VERSION, "kind": "VfioDeviceConfig"});
    let share = Some(json!({SHARE_PERCENT: "30"}));
    assert_eq!(
        refusal(&claim(
            "gpu",
            "gpu0-mps",
            share,
            json!([config("FromClaim", &[], vfio)])
        )),
        "claim default/train: request gpu: config VfioDeviceConfig does not fit device gpu0-mps: gpu0-mps is \
         shared (MPS); VfioDeviceConfig needs an exclusive whole card"
    );
}

#[test]
fn a_gpu_config_must_name_the_strategy_of_the_offer() {
    let time_slicing = gpu_config(json!({"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}}));
    let share = Some(json!({SHARE_PERCENT: "30"}));
    let on_mps = claim(
        "gpu",
        "gpu0-mps",
        share,
        json!([config("FromClaim", &[], time_slicing.clone())]),
    );
    assert_eq!(
        refusal(&on_mps),
        "claim default/train: request gpu: config GpuConfig does not fit device gpu0-mps: sharing.strategy \
         TimeSlicing differs from the strategy of gpu0-mps, MPS; allocate a device whose gpu.deckhouse.io sharing \
         attribute is TimeSlicing"
    );
    let on_exclusive = claim("gpu", "gpu0", None, json!([config("FromClaim", &[], time_slicing)]));
    assert!(refusal(&on_exclusive).contains("differs from the strategy of gpu0, Exclusive"));
}

#[test]
fn a_matching_time_slicing_config_reaches_the_node_with_its_interval() {
    let mut catalog = catalog();
    let shared = catalog["gpu0-mps"].clone();
    let OfferedDevice::SharedPhysical {
        pci_address,
        uuid,
        physical_gpu,
        ..
    } = shared
    else {
        unreachable!("gpu0-mps is a shared offer");
    };
    catalog.insert(
        "gpu0-timeslicing".into(),
        OfferedDevice::SharedPhysical {
            pci_address,
            uuid,
            physical_gpu,
            strategy: SharingStrategy::TimeSlicing,
        },
    );
    let time_slicing = gpu_config(json!({"strategy": "TimeSlicing", "timeSlicing": {"interval": "Long"}}));
    let share = Some(json!({SHARE_PERCENT: "100"}));
    let claim = claim(
        "gpu",
        "gpu0-timeslicing",
        share,
        json!([config("FromClass", &["gpu"], time_slicing)]),
    );
    let asked = ClaimRef {
        namespace: "default".into(),
        name: "train".into(),
        uid: "uid-1".into(),
    };
    let devices = resolve_devices(&asked, &claim, DRIVER, POOL, &catalog).unwrap();
    let expected = GpuSharing {
        strategy: SharingStrategy::TimeSlicing,
        time_slicing: Some(TimeSlicingConfig {
            interval: TimeSliceInterval::Long,
        }),
        mps: None,
    };
    assert_eq!(
        devices[0].config,
        Some(OpaqueConfig::GpuConfig(GpuConfig {
            sharing: Some(expected)
        }))
    );
    assert_eq!(devices[0].share_percent, Some(100));
}

#[test]
fn an_admin_result_and_a_subrequests_config_reach_the_node() {
    let mut admin = claim("gpu", "gpu0", None, json!([]));
    let results = admin.status.as_mut().unwrap().allocation.as_mut().unwrap();
    results.devices.as_mut().unwrap().results.as_mut().unwrap()[0].admin_access = Some(true);
    assert!(resolve(&admin).unwrap()[0].admin_access);
    assert!(!resolve(&claim("gpu", "gpu0", None, json!([]))).unwrap()[0].admin_access);

    // firstAvailable: the result names `gpu/shared`; the chosen subrequest's config applies.
    let configs = json!([
        config(
            "FromClaim",
            &["gpu/whole"],
            gpu_config(json!({"strategy": "Exclusive"}))
        ),
        config(
            "FromClaim",
            &["gpu/shared"],
            gpu_config(json!({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": 25}}))
        ),
    ]);
    let consumed = json!({SHARE_PERCENT: "50"});
    let devices = resolve(&claim("gpu/shared", "gpu0-mps", Some(consumed), configs)).unwrap();
    let Some(OpaqueConfig::GpuConfig(GpuConfig { sharing: Some(sharing) })) = &devices[0].config else {
        panic!("the config of gpu/shared: {:?}", devices[0].config);
    };
    assert_eq!(sharing.mps.as_ref().unwrap().default_active_thread_percentage, Some(25));
}
