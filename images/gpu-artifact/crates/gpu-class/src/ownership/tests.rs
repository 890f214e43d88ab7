use gpu_api::GPUClassSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;

fn class(name: &str, created: i64, resource: Option<&str>) -> GPUClass {
    let mut class = GPUClass::new(
        name,
        GPUClassSpec {
            extended_resource_name: resource.map(str::to_owned),
            ..GPUClassSpec::default()
        },
    );
    class.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
    class
}

fn device_class(name: &str, resource: Option<&str>) -> DeviceClass {
    let mut dc = DeviceClass::default();
    dc.metadata.name = Some(name.into());
    dc.spec.extended_resource_name = resource.map(str::to_owned);
    dc
}

#[test]
fn a_device_class_is_ours_by_owner_or_by_our_apply() {
    let mut dc = device_class("a30", None);
    assert!(!made_from(&dc, "a30"));
    dc.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "gpu.deckhouse.io/v1alpha1".into(),
        kind: "GPUClass".into(),
        name: "a30".into(),
        uid: "old".into(),
        ..OwnerReference::default()
    }]);
    assert!(made_from(&dc, "a30"));
    assert!(!made_from(&dc, "h100"));
    let mut applied = device_class("a30", None);
    applied.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some(FIELD_MANAGER.into()),
        operation: Some("Apply".into()),
        ..ManagedFieldsEntry::default()
    }]);
    assert!(made_from(&applied, "a30"));
}

#[test]
fn the_first_class_keeps_a_name_and_a_foreign_device_class_keeps_its_own() {
    let first = class("first", 10, Some("gpu.deckhouse.io/shared"));
    let second = class("second", 20, Some("gpu.deckhouse.io/shared"));
    let classes = [&first, &second];
    assert_eq!(resource_holder(&first, "gpu.deckhouse.io/shared", &classes, &[]), None);
    assert_eq!(
        resource_holder(&second, "gpu.deckhouse.io/shared", &classes, &[]),
        Some(ResourceHolder::GpuClass("first".into()))
    );
    // A class being deleted lets go.
    let mut leaving = first.clone();
    leaving.metadata.deletion_timestamp = leaving.metadata.creation_timestamp.clone();
    assert_eq!(
        resource_holder(&second, "gpu.deckhouse.io/shared", &[&leaving, &second], &[]),
        None
    );

    let hand_written = device_class("legacy", Some("gpu.deckhouse.io/a30"));
    let a30 = class("a30", 5, None);
    assert_eq!(
        resource_holder(&a30, "gpu.deckhouse.io/a30", &[&a30], &[&hand_written]),
        Some(ResourceHolder::DeviceClass("legacy".into()))
    );
    assert_eq!(
        ResourceHolder::DeviceClass("legacy".into()).to_string(),
        "DeviceClass legacy"
    );
}
