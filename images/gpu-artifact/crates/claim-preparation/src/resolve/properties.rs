//! Bad input by the thousand for claim resolution: a ResourceClaim as the API server may hand it
//! (another UID, not allocated, results of other drivers and pools, devices this node does not
//! offer, any share and config) resolves to offered devices of this pool or is refused with an
//! error that names the claim.

use dra_offers::{DeviceCatalog, OfferedDevice};
use gpu_api::opaque_config::SharingStrategy;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kubelet_plugin::ClaimRef;
use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};
use serde_json::{Value, json};

use super::resolve_devices;

const DRIVER: &str = "gpu.deckhouse.io";
const POOL: &str = "gpus/node-a";

fn catalog() -> DeviceCatalog {
    let pci = "0000:01:00.0"
        .parse()
        .unwrap_or_else(|_| unreachable!("a valid address"));
    DeviceCatalog::from([
        (
            "gpu0".to_owned(),
            OfferedDevice::Physical {
                pci_address: pci,
                uuid: "GPU-1".into(),
                physical_gpu: "node-a-0-10de-20b7".into(),
            },
        ),
        (
            "gpu0-mps".to_owned(),
            OfferedDevice::SharedPhysical {
                pci_address: pci,
                uuid: "GPU-1".into(),
                physical_gpu: "node-a-0-10de-20b7".into(),
                strategy: SharingStrategy::Mps,
            },
        ),
    ])
}

fn pick(options: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop_oneof![4 => proptest::sample::select(options).prop_map(str::to_owned), 1 => any::<String>()]
}

fn result() -> impl Strategy<Value = Value> {
    (
        pick(&["gpu", "gpu/a", ""]),
        pick(&[DRIVER, "other.example.com"]),
        pick(&[POOL, "gpus/node-b"]),
        pick(&["gpu0", "gpu0-mps", "gpu7"]),
        proptest::option::of(pick(&["50", "100", "0", "-1", "1e3", "x"])),
    )
        .prop_map(|(request, driver, pool, device, share)| {
            let mut result = json!({"request": request, "driver": driver, "pool": pool, "device": device});
            if let Some(share) = share {
                result["shareID"] = json!("7d6c2c4e-1d3c-4b8e-9a51-0f1f6c3b2a10");
                result["consumedCapacity"] = json!({"gpu.deckhouse.io/sharePercent": share});
            }
            result
        })
}

fn config() -> impl Strategy<Value = Value> {
    let kinds = pick(&["GpuConfig", "VfioDeviceConfig", "MigDeviceConfig"]);
    let strategies = pick(&["TimeSlicing", "MPS", "Exclusive"]);
    (
        pick(&["FromClass", "FromClaim"]),
        kinds,
        proptest::option::of(strategies),
    )
        .prop_map(|(source, kind, strategy)| {
            let mut parameters = json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": kind});
            if let Some(strategy) = strategy {
                parameters["sharing"] = json!({"strategy": strategy});
            }
            json!({"source": source, "opaque": {"driver": DRIVER, "parameters": parameters}})
        })
}

fn claim() -> impl Strategy<Value = (ResourceClaim, bool)> {
    let allocation = proptest::option::of((
        proptest::collection::vec(result(), 0..4),
        proptest::collection::vec(config(), 0..3),
    ));
    (any::<bool>(), allocation).prop_map(|(same_uid, allocation)| {
        let mut claim = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "train", "namespace": "default", "uid": if same_uid { "uid-1" } else { "uid-2" }},
            "spec": {"devices": {"requests": []}},
        });
        if let Some((results, configs)) = allocation {
            claim["status"] = json!({"allocation": {"devices": {"results": results, "config": configs}}});
        }
        let parsed = serde_json::from_value(claim).unwrap_or_default();
        (parsed, same_uid)
    })
}

#[test]
fn property_any_claim_resolves_to_offered_devices_or_is_refused_naming_it() {
    let asked = ClaimRef {
        namespace: "default".into(),
        name: "train".into(),
        uid: "uid-1".into(),
    };
    let catalog = catalog();
    check(
        "claim resolution",
        file!(),
        claim(),
        |(claim, same_uid)| match resolve_devices(&asked, &claim, DRIVER, POOL, &catalog) {
            Ok(devices) => {
                ensure(same_uid && !devices.is_empty(), || {
                    "resolved a replaced or empty claim".into()
                })?;
                for device in devices {
                    ensure(device.pool == POOL && catalog.contains_key(&device.device), || {
                        format!("resolved {} of {}", device.device, device.pool)
                    })?;
                }
                Ok(())
            }
            Err(error) => ensure(error.to_string().contains("default/train"), || {
                format!("names no claim: {error}")
            }),
        },
    );
}
