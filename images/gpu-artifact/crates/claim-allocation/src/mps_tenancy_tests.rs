//! The one-namespace-per-card rule of MPS shares against a real engine: two MPS offers as the
//! handler publishes them, a claim of one namespace on the first, and claims of that and another
//! namespace after it.

use super::*;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use serde_json::json;

const POOL: &str = "gpus/w1";

fn mps_offer(card: u32) -> serde_json::Value {
    json!({"name": format!("gpu{card}-mps"), "allowMultipleAllocations": true,
        "attributes": {"sharing": {"string": "MPS"}, "uuid": {"string": format!("GPU-{card}")}},
        "capacity": {"gpu.deckhouse.io/sharePercent": {"value": "100"}}})
}

pub(crate) fn slice() -> ResourceSlice {
    serde_json::from_value(json!({"metadata": {"name": "w1-mps"},
        "spec": {"driver": "gpu.deckhouse.io", "nodeName": "w1",
            "pool": {"name": POOL, "generation": 1, "resourceSliceCount": 1},
            "devices": [mps_offer(0), mps_offer(1)]}}))
    .unwrap()
}

pub(crate) fn class() -> DeviceClass {
    serde_json::from_value(
        json!({"metadata": {"name": "gpu-mps"}, "spec": {"selectors": [{"cel": {"expression":
        "device.driver == \"gpu.deckhouse.io\" && device.attributes[\"gpu.deckhouse.io\"].sharing == \"MPS\""}}]}}),
    )
    .unwrap()
}

pub(crate) fn share(namespace: &str, name: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "uid": name, "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mps",
            "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": "25"}}}}]}}}))
    .unwrap()
}

pub(crate) fn first_device(allocation: &k8s_openapi::api::resource::v1::AllocationResult) -> String {
    allocation
        .devices
        .as_ref()
        .and_then(|d| d.results.as_ref())
        .expect("results")[0]
        .device
        .clone()
}

/// Namespace `a`'s claim on `gpu0-mps`, allocated and committed.
fn engine_with_a_share_of_gpu0() -> (Allocator, AllocatedClaim) {
    let mut engine = Allocator::new(&[slice()], &[class()], &[]);
    let mut first = share("a", "first");
    let allocation = engine.allocate(&first, None).unwrap().expect("fits");
    assert_eq!(first_device(&allocation), "gpu0-mps");
    first.status = Some(k8s_openapi::api::resource::v1::ResourceClaimStatus {
        allocation: Some(allocation),
        ..Default::default()
    });
    engine.commit_claim(&first, first.status.as_ref().and_then(|s| s.allocation.as_ref()));
    (engine, AllocatedClaim::of(&first))
}

/// Where the engine puts `claim` once the rule has confined it.
fn device_for(engine: &mut Allocator, held: &AllocatedClaim, claim: &ResourceClaim) -> Option<String> {
    let namespace = claim.metadata.namespace.as_deref().unwrap();
    let cards = foreign_mps_cards(engine, &others_mps_results(namespace, std::iter::once(held)));
    let confined = confined(claim, &cards);
    let allocation = engine.allocate(confined.as_ref().unwrap_or(claim), None).unwrap()?;
    Some(first_device(&allocation))
}

#[test]
fn another_namespaces_mps_share_goes_to_a_card_without_foreign_mps_clients() {
    let (mut engine, held) = engine_with_a_share_of_gpu0();
    let unconfined = engine.allocate(&share("b", "second"), None).unwrap().unwrap();
    assert_eq!(
        first_device(&unconfined),
        "gpu0-mps",
        "the engine alone packs the card in use"
    );
    assert_eq!(
        device_for(&mut engine, &held, &share("b", "second")).as_deref(),
        Some("gpu1-mps")
    );
}

#[test]
fn the_same_namespace_shares_its_card_and_gets_no_extra_selector() {
    let (mut engine, held) = engine_with_a_share_of_gpu0();
    assert_eq!(
        device_for(&mut engine, &held, &share("a", "second")).as_deref(),
        Some("gpu0-mps")
    );
    assert!(others_mps_results("a", std::iter::once(&held)).is_empty());
}

#[test]
fn a_namespace_gets_nothing_when_every_card_has_foreign_mps_clients() {
    let (engine, held) = engine_with_a_share_of_gpu0();
    let mut results = others_mps_results("b", std::iter::once(&held));
    results.push((POOL.into(), "gpu1-mps".into()));
    let cards = foreign_mps_cards(&engine, &results);
    assert_eq!(cards, BTreeSet::from(["GPU-0".to_owned(), "GPU-1".to_owned()]));
    let mut engine = engine;
    let claim = confined(&share("b", "second"), &cards).unwrap();
    assert_eq!(engine.allocate(&claim, None).unwrap(), None);
}

/// An admin's claim over every MPS offer, in another namespace than the card's tenant.
fn admin_over_every_mps_offer(namespace: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "monitor", "namespace": namespace, "uid": "monitor", "resourceVersion": "1"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mps",
            "allocationMode": "All", "adminAccess": true,
            "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": "1"}}}}]}}}))
    .unwrap()
}

#[test]
fn admin_access_sees_every_card_and_is_no_mps_tenant() {
    let (mut engine, held) = engine_with_a_share_of_gpu0();
    let admin = admin_over_every_mps_offer("monitoring");
    let cards = foreign_mps_cards(&engine, &others_mps_results("monitoring", std::iter::once(&held)));
    let allocation = engine
        .allocate(confined(&admin, &cards).as_ref().unwrap_or(&admin), None)
        .unwrap()
        .expect("an admin reaches the cards another namespace's MPS clients use");
    let results = allocation.devices.unwrap().results.unwrap();
    let devices: Vec<&str> = results.iter().map(|r| r.device.as_str()).collect();
    assert_eq!(devices, ["gpu0-mps", "gpu1-mps"]);

    let mut admin = admin;
    admin.status = Some(k8s_openapi::api::resource::v1::ResourceClaimStatus {
        allocation: Some(k8s_openapi::api::resource::v1::AllocationResult {
            devices: Some(k8s_openapi::api::resource::v1::DeviceAllocationResult {
                results: Some(results),
                config: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    });
    let admin = AllocatedClaim::of(&admin);
    assert!(admin.held.is_empty(), "admin access holds nothing: {:?}", admin.held);
    assert!(
        others_mps_results("b", std::iter::once(&admin)).is_empty(),
        "an admin is no MPS tenant of the cards it looks at"
    );
}
