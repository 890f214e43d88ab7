//! Moving a card's functions to vfio-pci and back on fixture hosts, with the
//! kernel's side of each write played by the fixtures' kernel emulator.

use std::sync::Arc;
use std::time::Duration;

use host_fixtures::{HostTree, KernelEmulator, NamedHost};
use host_inventory::HostRoot;
use host_inventory::vfio::{
    PciFunction, VfioError, bind_to_vfio, bound_driver, check_group_viable, group_functions, iommu_group,
    restore_driver,
};

const TIMEOUT: Duration = Duration::from_secs(5);

fn emulated(host: NamedHost) -> (Arc<HostTree>, KernelEmulator, HostRoot) {
    let tree = Arc::new(host.build());
    let kernel = KernelEmulator::start(tree.clone());
    let root = HostRoot::new(tree.root());
    (tree, kernel, root)
}

#[test]
fn an_a30_moves_to_vfio_and_back_to_nvidia() {
    let (tree, _kernel, root) = emulated(NamedHost::A30Pcie);
    let card = "0000:01:00.0";
    assert_eq!(iommu_group(&root, card).unwrap(), 13);
    bind_to_vfio(&root, card, TIMEOUT).unwrap();
    assert_eq!(bound_driver(&root, card).unwrap().as_deref(), Some("vfio-pci"));
    assert_eq!(
        std::fs::read_to_string(tree.path("sys/bus/pci/devices/0000:01:00.0/driver_override")).unwrap(),
        "vfio-pci"
    );
    check_group_viable(&root, 13).unwrap();

    restore_driver(&root, card, Some("nvidia"), TIMEOUT).unwrap();
    assert_eq!(bound_driver(&root, card).unwrap().as_deref(), Some("nvidia"));
    assert_eq!(
        std::fs::read_to_string(tree.path("sys/bus/pci/devices/0000:01:00.0/driver_override")).unwrap(),
        "\n"
    );
    assert!(tree.path("sys/bus/pci/drivers/nvidia/0000:01:00.0").exists());
}

#[test]
fn a_group_with_the_audio_function_elsewhere_is_not_viable() {
    let (_tree, _kernel, root) = emulated(NamedHost::ConsumerWithAudio);
    let functions = group_functions(&root, 12).unwrap();
    assert_eq!(
        functions,
        [
            PciFunction {
                address: "0000:01:00.0".into(),
                vendor_id: 0x10de,
                device_id: 0x2684,
                class: 0x030000,
                driver: Some("nvidia".into()),
            },
            PciFunction {
                address: "0000:01:00.1".into(),
                vendor_id: 0x10de,
                device_id: 0x22ba,
                class: 0x040300,
                driver: Some("snd_hda_intel".into()),
            },
        ]
    );
    bind_to_vfio(&root, "0000:01:00.0", TIMEOUT).unwrap();
    let error = check_group_viable(&root, 12).unwrap_err();
    assert_eq!(
        error.to_string(),
        "IOMMU group 12 is not viable: 0000:01:00.1 (bound to snd_hda_intel) not on vfio-pci"
    );
    bind_to_vfio(&root, "0000:01:00.1", TIMEOUT).unwrap();
    check_group_viable(&root, 12).unwrap();
}

#[test]
fn without_a_kernel_the_wait_ends_with_an_error_naming_the_function() {
    let tree = NamedHost::A30Pcie.build();
    // The control files exist, but nothing applies the writes.
    tree.write_file("sys/bus/pci/drivers/nvidia/unbind", "");
    tree.write_file("sys/bus/pci/drivers/vfio-pci/bind", "");
    let root = HostRoot::new(tree.root());
    let error = bind_to_vfio(&root, "0000:01:00.0", Duration::from_millis(50)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "PCI function 0000:01:00.0: expected unbound after 50ms, but it is bound to nvidia"
    );
}

#[test]
fn a_missing_vfio_driver_or_iommu_group_is_named() {
    let tree = NamedHost::A30Pcie.build();
    let root = HostRoot::new(tree.root());
    let error = bind_to_vfio(&root, "0000:01:00.0", TIMEOUT).unwrap_err();
    assert!(matches!(error, VfioError::DriverNotLoaded { .. }), "{error}");
    assert!(error.to_string().contains("modprobe vfio_pci"), "{error}");
    tree.remove("sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/iommu_group");
    let error = iommu_group(&root, "0000:01:00.0").unwrap_err().to_string();
    assert!(
        error.starts_with("PCI function 0000:01:00.0 has no IOMMU group"),
        "{error}"
    );
}
