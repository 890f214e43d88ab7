//! The vendor link against the mock libnvidia-ml: the handler's view of the A30 and H100 fixtures,
//! a missing library, a driver that is not loaded, and a critical Xid reaching the health channel.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use gpu_api::{MigMode, Vendor};
use gpu_vendor::{HealthEventKind, PciAddress, VendorBackend};
use hardware_status::nvidia_status::{capabilities, nvidia_state};
use hardware_status::vendor_link::{BackendLoader, LinkReading, VendorLink};
use mock_nvml::test_support::{MockInstall, machine_fixture};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use tempfile::TempDir;

fn loader(library: std::path::PathBuf) -> BackendLoader {
    Arc::new(move || {
        NvidiaBackend::load(NvidiaBackendConfig {
            library_path: Some(library.clone()),
        })
        .map(|b| Arc::new(b) as Arc<dyn VendorBackend>)
    })
}

fn cards(address: &str) -> BTreeSet<PciAddress> {
    BTreeSet::from([address.parse().unwrap()])
}

#[tokio::test]
async fn the_a30_and_h100_fixtures_read_as_the_spec_fills_them() {
    for (fixture, address, slices, profiles, types) in [
        ("a30.yaml", "0000:01:00.0", 4, 5, "FP64 FP32 TF32 BF16 FP16 INT8 INT4"),
        (
            "h100-pcie.yaml",
            "0000:41:00.0",
            7,
            7,
            "FP64 FP32 TF32 BF16 FP16 FP8 INT8",
        ),
    ] {
        let dir = TempDir::new().unwrap();
        let install = MockInstall::new(dir.path(), &machine_fixture(fixture)).unwrap();
        let (sender, _events) = tokio::sync::mpsc::unbounded_channel();
        let mut link = VendorLink::new(loader(install.library_path()), sender);
        let LinkReading::Available {
            readings,
            health,
            monitor_problem,
        } = link.read(&cards(address)).await
        else {
            panic!("{fixture}: the mock loads");
        };
        assert_eq!(monitor_problem, None, "{fixture}: Xids are watched");
        let reading = health[&address.parse().unwrap()].as_ref().unwrap();
        assert!(
            !reading.lost && reading.recovery_action.is_some(),
            "{fixture}: {reading:?}"
        );
        let card = readings[&address.parse().unwrap()].as_ref().unwrap();
        let caps = capabilities(card);
        assert_eq!(caps.vendor, Some(Vendor::Nvidia));
        let nvidia = caps.nvidia.unwrap();
        let mig = nvidia.mig.unwrap();
        assert_eq!((mig.total_slices, mig.profiles.len()), (slices, profiles), "{fixture}");
        assert_eq!(nvidia.compute_types.unwrap().join(" "), types, "{fixture}");
        let state = nvidia_state(card);
        assert_eq!(
            state.mig.unwrap().mode,
            MigMode::Disabled,
            "{fixture} boots with MIG off"
        );
        assert!(state.gpu_uuid.unwrap().starts_with("GPU-"));
    }
}

#[tokio::test]
async fn a_missing_library_and_an_unloaded_driver_are_unavailable_with_the_reason() {
    let (sender, _events) = tokio::sync::mpsc::unbounded_channel();
    let mut missing = VendorLink::new(loader("/nonexistent/libnvidia-ml.so.1".into()), sender.clone());
    let LinkReading::Unavailable { reason } = missing.read(&cards("0000:01:00.0")).await else {
        panic!("nothing to load");
    };
    assert!(reason.contains("/nonexistent/libnvidia-ml.so.1"), "{reason}");
    assert!(missing.retry_at().is_some(), "a retry is scheduled");

    let dir = TempDir::new().unwrap();
    let machine = dir.path().join("no-driver.yaml");
    std::fs::write(
        &machine,
        format!(
            "include: [{}]\ndriverLoaded: false\ngpus:\n  - {{ pciBusId: \"0000:01:00.0\", model: a30-24gb, uuid: GPU-x }}\n",
            machine_fixture("a30.yaml").display()
        ),
    )
    .unwrap();
    let install_dir = TempDir::new().unwrap();
    let install = MockInstall::new(install_dir.path(), &machine).unwrap();
    let mut no_driver = VendorLink::new(loader(install.library_path()), sender);
    let LinkReading::Unavailable { reason } = no_driver.read(&cards("0000:01:00.0")).await else {
        panic!("the driver is not loaded");
    };
    assert!(reason.contains("driver is not loaded"), "{reason}");
}

#[tokio::test]
async fn a_critical_xid_reaches_the_health_channel() {
    let dir = TempDir::new().unwrap();
    let install = MockInstall::new(dir.path(), &machine_fixture("h100-pcie.yaml")).unwrap();
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel();
    let mut link = VendorLink::new(loader(install.library_path()), sender);
    assert!(matches!(
        link.read(&cards("0000:41:00.0")).await,
        LinkReading::Available { .. }
    ));
    install.state().inject_xid("0000:41:00.0", 79, None, None).unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), events.recv())
        .await
        .expect("the monitor thread forwards the Xid")
        .unwrap();
    assert_eq!(event.pci_address, "0000:41:00.0".parse().unwrap());
    assert!(matches!(event.kind, HealthEventKind::Xid { xid: 79, .. }));
}
