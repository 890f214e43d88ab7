use gpu_api::opaque_config::SharingStrategy;
use gpu_api::{ClassMps, ClassSharing, ClassTimeSlicing, MigClassSettings, NvidiaClassSettings, Requirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use super::*;

fn physical() -> GPUClassSpec {
    GPUClassSpec::default()
}

#[test]
fn a_plain_physical_class_is_valid() {
    let (problems, checked) = check_spec(&physical());
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(checked, CheckedRequirements::default());
}

#[test]
fn requirements_are_parsed_or_named_in_the_problem() {
    let mut spec = physical();
    spec.requirements = Some(Requirements {
        min_memory: Some(ApiQuantity("40Gi".into())),
        min_compute_capability: Some("8.6".into()),
    });
    let (problems, checked) = check_spec(&spec);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(checked.min_memory.as_deref(), Some("40Gi"));
    assert_eq!(checked.min_compute_capability, Some((8, 6)));

    spec.requirements = Some(Requirements {
        min_memory: Some(ApiQuantity("forty gigs".into())),
        min_compute_capability: Some("eight".into()),
    });
    let (problems, _) = check_spec(&spec);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("requirements.minMemory \"forty gigs\""),
        "{problems:?}"
    );
    assert!(problems[1].contains("<major>.<minor>"), "{problems:?}");
}

#[test]
fn the_crd_rules_are_checked_again() {
    let mig_without_profile = GPUClassSpec {
        device_type: ClassDeviceType::Mig,
        ..GPUClassSpec::default()
    };
    assert_eq!(
        check_spec(&mig_without_profile).0,
        ["nvidia.mig.profile is required with deviceType MIG"]
    );
    let shared_mig = GPUClassSpec {
        device_type: ClassDeviceType::Mig,
        nvidia: Some(NvidiaClassSettings {
            mig: Some(MigClassSettings {
                profile: "1g.6gb".into(),
            }),
        }),
        sharing: Some(ClassSharing {
            strategy: SharingStrategy::Mps,
            ..ClassSharing::default()
        }),
        ..GPUClassSpec::default()
    };
    assert!(check_spec(&shared_mig).0[0].contains("Physical only"));
    let vfio_shared = GPUClassSpec {
        vfio: Some(true),
        sharing: Some(ClassSharing {
            strategy: SharingStrategy::TimeSlicing,
            time_slicing: Some(ClassTimeSlicing::default()),
            mps: Some(ClassMps::default()),
        }),
        ..GPUClassSpec::default()
    };
    let problems = check_spec(&vfio_shared).0;
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("sharing.mps is allowed only"));
    assert!(problems[1].starts_with("vfio needs"));
}

#[test]
fn label_keys_and_values_must_be_labels() {
    let mut spec = physical();
    spec.selector = Some(gpu_api::PhysicalGpuSelector {
        match_labels: [
            ("gpu.deckhouse.io/device".to_owned(), "a30-pcie".to_owned()),
            ("Bad_Prefix/x".to_owned(), "ok".to_owned()),
            ("team".to_owned(), "not a value".to_owned()),
        ]
        .into(),
    });
    let problems = check_spec(&spec).0;
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("\"Bad_Prefix/x\""), "{problems:?}");
    assert!(problems[1].contains("\"not a value\""), "{problems:?}");
}

#[test]
fn the_extended_resource_name_defaults_to_our_domain_and_must_be_valid() {
    assert_eq!(
        extended_resource_name("a30", &physical()).unwrap(),
        "gpu.deckhouse.io/a30"
    );
    let long = "a".repeat(64);
    assert!(
        extended_resource_name(&long, &physical())
            .unwrap_err()
            .contains("set spec.extendedResourceName")
    );
    let mut spec = physical();
    spec.extended_resource_name = Some("nvidia.com/gpu".into());
    assert_eq!(extended_resource_name("whatever", &spec).unwrap(), "nvidia.com/gpu");
    spec.extended_resource_name = Some("example.kubernetes.io/gpu".into());
    assert!(
        extended_resource_name("x", &spec)
            .unwrap_err()
            .contains("outside kubernetes.io")
    );
    spec.extended_resource_name = Some("gpu".into());
    assert!(
        extended_resource_name("x", &spec)
            .unwrap_err()
            .contains("needs a domain")
    );
}
