//! Bad input by the thousand for what the node agent and the handler read from the host: kernel
//! uevents, sysfs attributes, pci.ids, os-release, DMI, and an IOMMU group's functions. Nothing
//! panics; a refusal names what was wrong; a bad device never hides the good ones.

use host_fixtures::{FixtureDevice, HostTree};
use host_inventory::vfio::{PciFunction, split_group};
use host_inventory::{GpuFilter, HostRoot, PciIds, judge_dmi, parse_os_release, scan_gpus, uevent};
use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};

/// Pieces of real uevents, so generated payloads reach past the header.
const UEVENT_PIECES: &[&str] = &[
    "add@/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
    "remove@/devices/x",
    "bind@/d",
    "ACTION=add",
    "ACTION=bind",
    "DEVPATH=/devices/pci0000:00/0000:00:01.0/0000:01:00.0",
    "SUBSYSTEM=pci",
    "DRIVER=nvidia",
    "PCI_CLASS=30200",
    "PCI_ID=10DE:20B7",
    "PCI_SLOT_NAME=0000:01:00.0",
    "SEQNUM=4711",
    "PCI_CLASS=zz",
    "PCI_ID=10DE",
    "SEQNUM=-1",
    "=",
    "libudev",
    "@",
    "",
];

fn uevent_payload() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => proptest::sample::select(UEVENT_PIECES).prop_map(|p| p.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..24),
    ];
    proptest::collection::vec(piece, 0..10).prop_map(|pieces| pieces.join(&0u8))
}

#[test]
fn property_any_uevent_parses_or_is_refused_with_a_reason() {
    check(
        "uevent messages",
        file!(),
        uevent_payload(),
        |payload| match uevent::parse(&payload) {
            Ok(Some(event)) => ensure(event.devpath.starts_with('/'), || {
                format!("devpath {:?}", event.devpath)
            }),
            Ok(None) => ensure(payload.starts_with(b"libudev"), || "ignored a kernel message".into()),
            Err(error) => ensure(!error.to_string().is_empty(), || "an empty error".into()),
        },
    );
}

const PCI_IDS_LINES: &[&str] = &[
    "10de  NVIDIA Corporation",
    "\t20b7  GA100GL [A30 PCIe]",
    "\t\t10de 1532  A30",
    "1002  AMD",
    "\t73bf  Navi 21",
    "C 03  Display controller",
    "\t02  3D controller",
    "\t\t00  prog-if",
    "# comment",
    "",
    "\t",
    "zzzz  Bad",
    "10de",
    "\t20b7",
    "C 0",
    "C zz  Bad class",
    "\t\t\t10de",
    "ffff  Illegal Vendor ID",
];

#[test]
fn property_any_pci_ids_text_parses_and_every_lookup_answers() {
    let line = prop_oneof![
        4 => proptest::sample::select(PCI_IDS_LINES).prop_map(str::to_owned),
        1 => any::<String>(),
    ];
    let inputs = (
        proptest::collection::vec(line, 0..30),
        any::<u16>(),
        any::<u16>(),
        any::<u16>(),
    );
    check("pci.ids", file!(), inputs, |(lines, vendor, device, class)| {
        let ids = PciIds::parse(&lines.join("\n"), &[0x10de, 0x1002, vendor]);
        let _ = (
            ids.vendor_name(vendor),
            ids.device_name(vendor, device),
            ids.class_name(class),
        );
        let _ = ids.subsystem_name(vendor, device, vendor, device);
        let a30 = lines.iter().any(|l| l == "10de  NVIDIA Corporation")
            && lines
                .iter()
                .skip_while(|l| *l != "10de  NVIDIA Corporation")
                .nth(1)
                .map(String::as_str)
                == Some("\t20b7  GA100GL [A30 PCIe]");
        ensure(
            !a30 || ids.device_name(0x10de, 0x20b7) == Some("GA100GL [A30 PCIe]"),
            || "a valid A30 line right below its vendor was lost".into(),
        )
    });
}

#[test]
fn property_any_os_release_and_dmi_give_facts_with_reasons() {
    let os_line = prop_oneof![
        Just("ID=ubuntu".to_owned()),
        Just("VERSION_ID=\"22.04\"".to_owned()),
        Just("NAME='Debian'".to_owned()),
        Just("# c".to_owned()),
        Just("=x".to_owned()),
        Just("ID=\"unterminated".to_owned()),
        any::<String>(),
    ];
    let inputs = (
        proptest::collection::vec(os_line, 0..12),
        any::<String>(),
        any::<String>(),
    );
    check("os-release and DMI", file!(), inputs, |(lines, product, vendor)| {
        for (key, _) in parse_os_release(&lines.join("\n")) {
            ensure(!key.is_empty() && !key.contains('='), || format!("key {key:?}"))?;
        }
        let verdict = judge_dmi(&product, &vendor);
        ensure(!verdict.reason.is_empty(), || "a verdict without a reason".into())
    });
}

/// What a sysfs attribute of a device may hold, kernel-written or not.
fn attribute() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("0x10de\n".to_owned()),
        Just("0x030200\n".to_owned()),
        Just("0x20b7\n".to_owned()),
        Just("-1\n".to_owned()),
        Just("0\n".to_owned()),
        Just(String::new()),
        "0x[0-9a-fA-F]{0,9}",
        any::<String>(),
    ]
}

#[test]
fn property_any_sysfs_attribute_gives_a_gpu_or_a_warning_naming_the_file() {
    let host = HostTree::new();
    let broken = FixtureDevice::a30_pcie("0000:01:00.0");
    host.place_device(&broken);
    host.place_device(&FixtureDevice::a30_pcie("0000:02:00.0"));
    let root = HostRoot::new(host.root());
    let inputs = (
        proptest::sample::select(&["class", "vendor", "device", "numa_node", "subsystem_vendor"][..]),
        attribute(),
    );
    check("sysfs attributes", file!(), inputs, |(name, value)| {
        let file = format!("sys/{}/{name}", broken.devpath());
        let original = std::fs::read(host.path(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        host.write_file(&file, &value);
        let scan = scan_gpus(&root, &GpuFilter::nvidia(), None);
        host.write_file(&file, &original);
        let good = scan.gpus.iter().any(|gpu| gpu.address == "0000:02:00.0");
        let told = scan.gpus.iter().any(|gpu| gpu.address == "0000:01:00.0")
            || scan
                .warnings
                .iter()
                .any(|w| w.path.to_string_lossy().contains("0000:01:00.0"))
            || name == "class"
            || name == "vendor";
        ensure(good && told, || format!("{name}={value:?}: {:?}", scan))
    });
}

fn function() -> impl Strategy<Value = PciFunction> {
    let address = (0u8..4, 0u8..3, 0u8..8).prop_map(|(bus, dev, func)| format!("0000:{bus:02x}:{dev:02x}.{func}"));
    let vendor = prop_oneof![Just(0x10deu16), Just(0x8086), any::<u16>()];
    let class = prop_oneof![
        Just(0x030200u32),
        Just(0x040300),
        Just(0x0c0330),
        Just(0x0c8000),
        Just(0x060400),
        Just(0x020000),
        0u32..0x1000000
    ];
    (address, vendor, any::<u16>(), class).prop_map(|(address, vendor_id, device_id, class)| PciFunction {
        address,
        vendor_id,
        device_id,
        class,
        driver: None,
    })
}

#[test]
fn property_an_iommu_group_moves_only_the_cards_own_functions() {
    let inputs = (function(), proptest::collection::vec(function(), 0..8));
    check("IOMMU group split", file!(), inputs, |(card, mut group)| {
        group.push(card.clone());
        let split = split_group(&card, group.clone());
        let slot = |a: &str| a.rsplit_once('.').map(|(s, _)| s.to_owned()).unwrap_or_default();
        for own in &split.own {
            let companion = slot(&own.address) == slot(&card.address) && own.vendor_id == card.vendor_id;
            ensure(own.address == card.address || companion, || {
                format!("{own:?} moved with {card:?}")
            })?;
        }
        let bridges = group.iter().filter(|f| f.is_bridge()).count();
        ensure(split.own.len() + split.foreign.len() + bridges == group.len(), || {
            "a function was lost".into()
        })
    });
}
