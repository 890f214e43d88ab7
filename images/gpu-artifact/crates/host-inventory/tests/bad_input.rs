//! Broken or surprising host data: each case gets a clear answer, and one
//! bad device never hides the others.

use host_fixtures::{FixtureDevice, HostTree, NamedHost, PCI_IDS_PATH};
use host_inventory::{GpuFilter, HostRoot, PciIds, PciIdsError, read_host_facts, scan_gpus};

/// Two A30s; the test breaks the first.
fn two_gpus() -> HostTree {
    let host = HostTree::new();
    host.place_device(&FixtureDevice::a30_pcie("0000:01:00.0"));
    host.place_device(&FixtureDevice::a30_pcie("0000:02:00.0"));
    host
}

fn attribute(gpu: &FixtureDevice, name: &str) -> String {
    format!("sys/{}/{name}", gpu.devpath())
}

#[test]
fn junk_in_class_skips_that_device_with_a_warning_naming_the_file() {
    let host = two_gpus();
    let broken = host.device("0000:01:00.0").unwrap();
    host.write_file(attribute(&broken, "class"), "banana\n");

    let scan = scan_gpus(&HostRoot::new(host.root()), &GpuFilter::nvidia(), None);

    let found: Vec<(&str, usize)> = scan.gpus.iter().map(|g| (g.address.as_str(), g.index)).collect();
    assert_eq!(found, [("0000:02:00.0", 0)]);
    assert_eq!(scan.warnings.len(), 1);
    assert_eq!(
        scan.warnings[0].path,
        host.path("sys/bus/pci/devices/0000:01:00.0/class")
    );
    assert!(scan.warnings[0].problem.contains("\"banana\""), "{}", scan.warnings[0]);
    assert!(scan.warnings[0].to_string().contains("device skipped"));
}

#[test]
fn a_missing_vendor_file_skips_that_device_with_a_warning() {
    let host = two_gpus();
    let broken = host.device("0000:01:00.0").unwrap();
    host.remove(attribute(&broken, "vendor"));

    let scan = scan_gpus(&HostRoot::new(host.root()), &GpuFilter::nvidia(), None);

    assert_eq!(scan.gpus.len(), 1);
    assert_eq!(scan.gpus[0].address, "0000:02:00.0");
    assert_eq!(scan.warnings.len(), 1);
    assert_eq!(
        scan.warnings[0].path,
        host.path("sys/bus/pci/devices/0000:01:00.0/vendor")
    );
    assert!(scan.warnings[0].problem.starts_with("missing"), "{}", scan.warnings[0]);
}

#[test]
fn a_bad_optional_attribute_is_a_warning_and_the_gpu_is_kept() {
    let host = two_gpus();
    let gpu = host.device("0000:01:00.0").unwrap();
    host.write_file(attribute(&gpu, "numa_node"), "lots\n");

    let scan = scan_gpus(&HostRoot::new(host.root()), &GpuFilter::nvidia(), None);

    assert_eq!(scan.gpus.len(), 2);
    assert_eq!(scan.gpus[0].numa_node, None);
    assert_eq!(scan.warnings.len(), 1);
    assert_eq!(
        scan.warnings[0].path,
        host.path("sys/bus/pci/devices/0000:01:00.0/numa_node")
    );
}

#[test]
fn an_entry_that_is_not_a_pci_address_is_a_warning() {
    let host = two_gpus();
    host.write_file("sys/bus/pci/devices/not-a-device", "");

    let scan = scan_gpus(&HostRoot::new(host.root()), &GpuFilter::nvidia(), None);

    assert_eq!(scan.gpus.len(), 2);
    assert_eq!(scan.warnings.len(), 1);
    assert_eq!(scan.warnings[0].path, host.path("sys/bus/pci/devices/not-a-device"));
}

#[test]
fn without_pci_ids_names_are_absent_and_ids_present() {
    let host = NamedHost::A30Pcie.build();
    host.remove(PCI_IDS_PATH);
    let root = HostRoot::new(host.root());

    let error = PciIds::load(&root, &[0x10de]).unwrap_err();
    let PciIdsError::NotFound { searched, .. } = &error else {
        panic!("expected NotFound, got {error}");
    };
    assert_eq!(searched.len(), 3);
    assert_eq!(searched[0], host.path("usr/share/misc/pci.ids"));

    let scan = scan_gpus(&root, &GpuFilter::nvidia(), None);
    let gpu = &scan.gpus[0];
    assert_eq!(
        (gpu.vendor_id.as_str(), gpu.device_id.as_str(), gpu.class_code.as_str()),
        ("10de", "20b7", "0302")
    );
    assert_eq!(
        (&gpu.vendor_name, &gpu.device_name, &gpu.class_name),
        (&None, &None, &None)
    );
    assert_eq!(gpu.model_label, "10de-20b7");
}

#[test]
fn a_gpu_newer_than_the_pci_ids_database_is_labelled_by_its_ids() {
    let host = NamedHost::A30Pcie.build();
    // 10de:2900 is not in the excerpt, as a card released after the host's database.
    host.place_device(&FixtureDevice::new(
        "0000:81:00.0",
        host_fixtures::CLASS_3D,
        0x10de,
        0x2900,
        (0x10de, 0x1),
    ));
    let root = HostRoot::new(host.root());
    let ids = PciIds::load(&root, &[0x10de]).unwrap();

    let scan = scan_gpus(&root, &GpuFilter::nvidia(), Some(&ids));

    let new = &scan.gpus[1];
    assert_eq!(new.vendor_name.as_deref(), Some("NVIDIA Corporation"));
    assert_eq!(new.device_name, None);
    assert_eq!(new.model_label, "10de-2900");
}

#[test]
fn unreadable_dmi_is_not_bare_metal_and_says_why() {
    let host = NamedHost::DmiUnreadable.build();
    let facts = read_host_facts(&HostRoot::new(host.root()));
    assert!(!facts.bare_metal);
    assert!(
        facts.bare_metal_reason.starts_with("DMI unreadable ("),
        "{}",
        facts.bare_metal_reason
    );
    assert!(
        facts
            .bare_metal_reason
            .contains(&host.path("sys/class/dmi/id/product_name").display().to_string()),
        "{}",
        facts.bare_metal_reason
    );
}

#[test]
fn half_readable_dmi_is_not_bare_metal_either() {
    let host = NamedHost::A30Pcie.build();
    host.remove("sys/class/dmi/id/sys_vendor");
    let facts = read_host_facts(&HostRoot::new(host.root()));
    assert!(!facts.bare_metal);
    assert!(
        facts.bare_metal_reason.contains("sys_vendor"),
        "{}",
        facts.bare_metal_reason
    );
}
