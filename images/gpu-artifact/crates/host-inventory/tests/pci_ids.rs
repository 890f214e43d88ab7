//! The pci.ids reader on the real-format excerpt the fixtures ship.

use host_fixtures::{HostTree, PCI_IDS_EXCERPT};
use host_inventory::{HostRoot, PciIds, PciIdsError};

#[test]
fn names_come_from_vendor_device_subsystem_and_class_lines() {
    let ids = PciIds::parse(PCI_IDS_EXCERPT, &[0x10de, 0x1002]);
    assert_eq!(ids.vendor_name(0x10de), Some("NVIDIA Corporation"));
    assert_eq!(ids.device_name(0x10de, 0x20b7), Some("GA100GL [A30 PCIe]"));
    assert_eq!(ids.device_name(0x10de, 0x2330), Some("GH100[H100 SXM5 80GB]"));
    assert_eq!(
        ids.subsystem_name(0x1002, 0x73bf, 0x1002, 0x0e3a),
        Some("Radeon RX 6900 XT")
    );
    assert_eq!(
        ids.subsystem_name(0x1002, 0x73bf, 0x148c, 0x2408),
        Some("Red Devil AMD Radeon RX 6900 XT")
    );
    assert_eq!(ids.class_name(0x0302), Some("3D controller"));
    assert_eq!(ids.class_name(0x0300), Some("VGA compatible controller"));
    assert_eq!(ids.class_name(0x0403), Some("Audio device"));
}

#[test]
fn only_the_asked_vendors_are_kept() {
    let ids = PciIds::parse(PCI_IDS_EXCERPT, &[0x10de]);
    assert_eq!(ids.vendor_name(0x1002), None);
    assert_eq!(ids.device_name(0x1002, 0x73bf), None);
    assert_eq!(ids.vendor_name(0x1093), None);
    assert_eq!(ids.device_name(0x10de, 0x2684), Some("AD102 [GeForce RTX 4090]"));
}

#[test]
fn the_same_device_id_under_another_vendor_does_not_leak() {
    // National Instruments also has a 73bf, listed right after AMD's entries.
    let ids = PciIds::parse(PCI_IDS_EXCERPT, &[0x1002, 0x1093]);
    assert_eq!(
        ids.device_name(0x1002, 0x73bf),
        Some("Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]")
    );
    assert_eq!(ids.device_name(0x1093, 0x73bf), Some("PCI-8517 FlexRay"));
}

#[test]
fn an_unknown_subclass_falls_back_to_the_class_name_and_unknown_class_to_none() {
    let ids = PciIds::parse(PCI_IDS_EXCERPT, &[]);
    assert_eq!(ids.class_name(0x0305), Some("Display controller"));
    assert_eq!(ids.class_name(0x1200), None);
}

#[test]
fn damaged_lines_cost_only_themselves() {
    let text = "10de  NVIDIA Corporation\n\tzzzz  Broken device\n\t20b7  GA100GL [A30 PCIe]\n\t\t10de  no subdevice\n\
                \t\t10de 1532  A30 24GB\n\t2331\n\t\t\t\tdeep\nnot a vendor line\n\t2684  orphan under junk\n\
                C zz  Broken class\n\t02  orphan subclass\nC 03  Display controller\n\t02  3D controller\n";
    let ids = PciIds::parse(text, &[0x10de]);
    assert_eq!(ids.device_name(0x10de, 0x20b7), Some("GA100GL [A30 PCIe]"));
    assert_eq!(ids.subsystem_name(0x10de, 0x20b7, 0x10de, 0x1532), Some("A30 24GB"));
    assert_eq!(ids.device_name(0x10de, 0x2331), None);
    assert_eq!(ids.device_name(0x10de, 0x2684), None);
    assert_eq!(ids.class_name(0x0302), Some("3D controller"));
}

#[test]
fn non_utf8_bytes_do_not_stop_the_parse() {
    let mut bytes = b"10de  NVIDIA Corporation\n\t20b7  GA100GL [A30 PCIe]\n\t1234  Caf\xe9\n".to_vec();
    bytes.extend_from_slice(b"\t2331  GH100 [H100 PCIe]\n");
    let ids = PciIds::read(bytes.as_slice(), &[0x10de]).unwrap();
    assert_eq!(ids.device_name(0x10de, 0x2331), Some("GH100 [H100 PCIe]"));
    assert_eq!(ids.device_name(0x10de, 0x1234), Some("Caf\u{fffd}"));
}

#[test]
fn load_finds_the_fedora_location_too() {
    let host = HostTree::new();
    host.write_file("usr/share/hwdata/pci.ids", PCI_IDS_EXCERPT);
    let ids = PciIds::load(&HostRoot::new(host.root()), &[0x10de]).unwrap();
    assert_eq!(ids.device_name(0x10de, 0x20b2), Some("GA100 [A100 SXM4 80GB]"));
}

#[test]
fn an_unreadable_database_is_a_read_error_naming_it() {
    let host = HostTree::new();
    // A directory where the file should be: opening works, reading fails.
    std::fs::create_dir_all(host.path("usr/share/misc/pci.ids")).unwrap();
    let error = PciIds::load(&HostRoot::new(host.root()), &[0x10de]).unwrap_err();
    let PciIdsError::Read { path, .. } = &error else {
        panic!("expected a read error, got {error}");
    };
    assert_eq!(path, &host.path("usr/share/misc/pci.ids"));
}
