//! uevent payloads: the kernel's format as the fixtures produce it, one
//! captured from a real kernel, udev's messages, and malformed input.

use host_fixtures::{FixtureDevice, HostTree};
use host_inventory::uevent::{PciId, UEvent, UEventAction, UEventError, parse};

/// Received on this project's test machine from NETLINK_KOBJECT_UEVENT group 1
/// after `echo change > /sys/bus/pci/devices/0000:00:03.0/uevent` (a virtio
/// NIC): a synthetic event, hence SYNTH_UUID.
const CAPTURED_CHANGE: &[u8] = b"change@/devices/pci0000:00/0000:00:03.0\0ACTION=change\0\
DEVPATH=/devices/pci0000:00/0000:00:03.0\0SUBSYSTEM=pci\0SYNTH_UUID=0\0DRIVER=virtio-pci\0\
PCI_CLASS=20000\0PCI_ID=1AF4:1041\0PCI_SUBSYS_ID=1AF4:1041\0PCI_SLOT_NAME=0000:00:03.0\0\
MODALIAS=pci:v00001AF4d00001041sv00001AF4sd00001041bc02sc00i00\0SEQNUM=813\0";

fn parsed(payload: &[u8]) -> UEvent {
    parse(payload).expect("a valid payload").expect("a kernel event")
}

#[test]
fn a_captured_kernel_event_parses_into_every_field() {
    assert_eq!(
        parsed(CAPTURED_CHANGE),
        UEvent {
            action: UEventAction::Change,
            devpath: "/devices/pci0000:00/0000:00:03.0".into(),
            subsystem: Some("pci".into()),
            driver: Some("virtio-pci".into()),
            pci_slot_name: Some("0000:00:03.0".into()),
            pci_class: Some(0x020000),
            pci_id: Some(PciId {
                vendor: 0x1af4,
                device: 0x1041
            }),
            seqnum: Some(813),
        }
    );
}

#[test]
fn hotplug_of_a_gpu_parses_as_add_bind_then_unbind_remove() {
    let host = HostTree::new();
    let mut events = host.add_device(&FixtureDevice::a30_pcie("0000:01:00.0"));
    events.extend(host.remove_device("0000:01:00.0"));

    let events: Vec<UEvent> = events.iter().map(|p| parsed(p)).collect();
    let summary: Vec<(UEventAction, Option<&str>)> = events.iter().map(|e| (e.action, e.driver.as_deref())).collect();
    assert_eq!(
        summary,
        [
            (UEventAction::Add, None),
            (UEventAction::Bind, Some("nvidia")),
            (UEventAction::Unbind, None),
            (UEventAction::Remove, None),
        ]
    );
    for event in &events {
        assert!(event.is_pci());
        assert_eq!(event.devpath, "/devices/pci0000:00/0000:00:01.0/0000:01:00.0");
        assert_eq!(event.pci_slot_name.as_deref(), Some("0000:01:00.0"));
        assert_eq!(event.pci_class, Some(0x030200));
        assert_eq!(
            event.pci_id,
            Some(PciId {
                vendor: 0x10de,
                device: 0x20b7
            })
        );
    }
    let seqnums: Vec<u64> = events.iter().map(|e| e.seqnum.unwrap()).collect();
    assert!(seqnums.windows(2).all(|w| w[0] < w[1]), "{seqnums:?}");
}

#[test]
fn a_non_pci_event_parses_with_its_subsystem() {
    let event = parsed(b"add@/module/nvidia\0ACTION=add\0DEVPATH=/module/nvidia\0SUBSYSTEM=module\0SEQNUM=5\0");
    assert_eq!(event.action, UEventAction::Add);
    assert_eq!(event.subsystem.as_deref(), Some("module"));
    assert!(!event.is_pci());
}

#[test]
fn bytes_that_are_not_utf8_in_fields_not_read_are_tolerated() {
    let event = parsed(b"add@/devices/virtual/input/input9\0ACTION=add\0NAME=\"Caf\xe9 keyboard\"\0SUBSYSTEM=input\0");
    assert_eq!(event.subsystem.as_deref(), Some("input"));
}

#[test]
fn udev_messages_are_recognised_and_set_aside() {
    // libudev's monitor header: magic, then a binary header with 0xfeedcafe.
    let mut message = b"libudev\0".to_vec();
    message.extend_from_slice(&0xfeedcafe_u32.to_be_bytes());
    message.extend_from_slice(b"\x28\0\0\0\x28\0\0\0ACTION=add\0SUBSYSTEM=pci\0");
    assert_eq!(parse(&message), Ok(None));
}

#[test]
fn malformed_payloads_are_typed_errors() {
    let cases: Vec<(&[u8], UEventError)> = vec![
        (b"", UEventError::Empty),
        (b"\0\0", UEventError::Empty),
        (
            b"add@/devices/x\0ACTION=add\0DRIVER=\xff\0",
            UEventError::NotUtf8 { offset: 33 },
        ),
        (b"add@/devices/\xff\0", UEventError::NotUtf8 { offset: 13 }),
        (
            b"ACTION=add\0DEVPATH=/devices/x\0",
            UEventError::BadHeader {
                header: "ACTION=add".into(),
            },
        ),
        (
            b"add@devices/x\0",
            UEventError::BadHeader {
                header: "add@devices/x".into(),
            },
        ),
        (
            b"@/devices/x\0",
            UEventError::BadHeader {
                header: "@/devices/x".into(),
            },
        ),
        (
            b"explode@/devices/x\0",
            UEventError::UnknownAction {
                action: "explode".into(),
            },
        ),
        (
            b"add@/devices/x\0SUBSYSTEM\0",
            UEventError::BadField {
                field: "SUBSYSTEM".into(),
            },
        ),
        (
            b"add@/devices/x\0=pci\0",
            UEventError::BadField { field: "=pci".into() },
        ),
        (
            b"add@/devices/x\0ACTION=remove\0",
            UEventError::HeaderMismatch {
                key: "ACTION".into(),
                header: "add@/devices/x".into(),
                field: "remove".into(),
            },
        ),
        (
            b"add@/devices/x\0DEVPATH=/devices/y\0",
            UEventError::HeaderMismatch {
                key: "DEVPATH".into(),
                header: "add@/devices/x".into(),
                field: "/devices/y".into(),
            },
        ),
        (
            b"add@/devices/x\0PCI_CLASS=3G200\0",
            UEventError::BadValue {
                key: "PCI_CLASS".into(),
                value: "3G200".into(),
            },
        ),
        (
            b"add@/devices/x\0PCI_CLASS=1000000\0",
            UEventError::BadValue {
                key: "PCI_CLASS".into(),
                value: "1000000".into(),
            },
        ),
        (
            b"add@/devices/x\0PCI_ID=10DE\0",
            UEventError::BadValue {
                key: "PCI_ID".into(),
                value: "10DE".into(),
            },
        ),
        (
            b"add@/devices/x\0PCI_ID=10DE:20B7X\0",
            UEventError::BadValue {
                key: "PCI_ID".into(),
                value: "10DE:20B7X".into(),
            },
        ),
        (
            b"add@/devices/x\0SEQNUM=-1\0",
            UEventError::BadValue {
                key: "SEQNUM".into(),
                value: "-1".into(),
            },
        ),
    ];
    for (payload, expected) in cases {
        assert_eq!(parse(payload), Err(expected), "{:?}", String::from_utf8_lossy(payload));
    }
}

#[test]
fn every_truncation_and_corruption_of_a_real_payload_answers_without_panicking() {
    for len in 0..CAPTURED_CHANGE.len() {
        let _ = parse(&CAPTURED_CHANGE[..len]);
    }
    for position in 0..CAPTURED_CHANGE.len() {
        for byte in [0u8, b'=', b'@', 0xff] {
            let mut corrupted = CAPTURED_CHANGE.to_vec();
            corrupted[position] = byte;
            let _ = parse(&corrupted);
        }
    }
    // A payload cut after a complete field is still a valid event.
    let cut = CAPTURED_CHANGE.iter().position(|b| *b == 0).unwrap() + 1;
    assert_eq!(parsed(&CAPTURED_CHANGE[..cut]).subsystem, None);
}
