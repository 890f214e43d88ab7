//! NVML missing, driver not loaded, unknown cards: clean errors, no panics.

mod support;

use std::path::PathBuf;

use gpu_vendor::{PciAddress, VendorBackend, VendorError};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use support::MockNode;

#[test]
fn a_missing_library_is_unavailable() {
    let dir = tempfile::TempDir::new().unwrap();
    let config = NvidiaBackendConfig {
        library_path: Some(dir.path().join("libnvidia-ml.so.1")),
    };
    let error = NvidiaBackend::load(config).unwrap_err();
    assert!(
        matches!(&error, VendorError::Unavailable { reason } if reason.contains("libnvidia-ml.so.1")),
        "{error:?}"
    );
}

#[test]
fn a_library_that_is_not_nvml_is_unavailable() {
    // libc is loadable but has no nvmlInit_v2.
    let config = NvidiaBackendConfig {
        library_path: Some(PathBuf::from("libc.so.6")),
    };
    let error = NvidiaBackend::load(config).unwrap_err();
    assert!(matches!(error, VendorError::Unavailable { .. }), "{error:?}");
}

#[test]
fn a_driver_that_is_not_loaded_is_reported_as_such() {
    let node = MockNode::from_yaml(
        "include: [FIXTURES/a30.yaml]\ndriverLoaded: false\ngpus:\n  - { pciBusId: \"0000:3b:00.0\", model: a30-24gb, uuid: GPU-x }\n",
    );
    let error = NvidiaBackend::load(NvidiaBackendConfig {
        library_path: Some(node.install.library_path()),
    })
    .unwrap_err();
    assert_eq!(error, VendorError::DriverNotLoaded);
}

#[test]
fn an_unknown_pci_address_is_not_found() {
    let node = MockNode::from_fixture("a30.yaml");
    let backend = node.backend();
    let absent: PciAddress = "0000:99:00.0".parse().unwrap();
    assert_eq!(backend.inventory(&absent).unwrap_err(), VendorError::NotFound(absent));
    assert_eq!(
        backend.mig_instances(&absent).unwrap_err(),
        VendorError::NotFound(absent)
    );
}

#[test]
fn nvml_spellings_of_the_address_reach_the_same_card() {
    let node = MockNode::from_fixture("h100-pcie.yaml");
    let backend = node.backend();
    let from_nvml: PciAddress = "00000000:41:00.0".parse().unwrap();
    assert_eq!(backend.inventory(&from_nvml).unwrap().uuid, node.card(0).uuid);
}
