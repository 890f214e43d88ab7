//! What one card offers, read from an A30 whose inventory comes through the NVIDIA backend from the
//! mock libnvidia-ml (real `nvidia-smi mig -lgip/-lgipp` tables): names, attributes, counters, and
//! that the counters keep overlapping offers apart.

mod support;

use dra_offers::{Layout, OfferedDevice, fit_together, is_dns_label};
use gpu_vendor::MigPlacement;
use support::*;

fn a30() -> dra_offers::Publication {
    publish(&cards("a30.yaml", "a30-pcie"), ALL, Layout::Combined)
}

#[test]
fn a30_offers_the_card_and_every_placement_in_name_order() {
    let publication = a30();
    let names: Vec<&str> = devices(&publication).iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "gpu0",
            "gpu0-mig-1g6gb-0",
            "gpu0-mig-1g6gb-1",
            "gpu0-mig-1g6gb-2",
            "gpu0-mig-1g6gb-3",
            "gpu0-mig-1g6gb-me-0",
            "gpu0-mig-1g6gb-me-1",
            "gpu0-mig-1g6gb-me-2",
            "gpu0-mig-1g6gb-me-3",
            "gpu0-mig-2g12gb-0",
            "gpu0-mig-2g12gb-2",
            "gpu0-mig-2g12gb-me-0",
            "gpu0-mig-2g12gb-me-2",
            "gpu0-mig-4g24gb-0",
        ]
    );
    assert!(names.iter().all(|n| is_dns_label(n)));
    assert_eq!(
        publication.catalog.keys().map(String::as_str).collect::<Vec<_>>(),
        names
    );
    assert_eq!(
        publication.catalog["gpu0-mig-2g12gb-2"],
        OfferedDevice::Mig {
            pci_address: "0000:01:00.0".parse().unwrap(),
            parent_uuid: "GPU-010a3000-0000-4000-8000-a30000000001".into(),
            physical_gpu: "node-a-0-10de-xxxx".into(),
            profile_id: 5,
            profile_name: "2g.12gb".into(),
            placement: MigPlacement { start: 2, size: 2 },
        }
    );
}

#[test]
fn a30_counter_set_has_memory_slices_and_the_most_of_each_engine() {
    let publication = a30();
    let sets = counter_sets(&publication.slices);
    let set = &sets["pgpu-0000-01-00-0"];
    let expected: Vec<(&str, u64)> = vec![
        ("copy-engines", 4),
        ("decoders", 4),
        ("encoders", 0),
        ("jpeg-engines", 1),
        ("memory", 24576 * 1024 * 1024),
        ("memory-slice-0", 1),
        ("memory-slice-1", 1),
        ("memory-slice-2", 1),
        ("memory-slice-3", 1),
        ("multiprocessors", 56),
        ("ofa-engines", 1),
    ];
    assert_eq!(set.iter().map(|(k, v)| (k.as_str(), *v)).collect::<Vec<_>>(), expected);
}

#[test]
fn the_whole_card_consumes_its_whole_counter_set() {
    let publication = a30();
    let sets = counter_sets(&publication.slices);
    let (set, consumed) = consumption(device(&publication, "gpu0"));
    assert_eq!(set, "pgpu-0000-01-00-0");
    assert_eq!(consumed, sets[&set]);
}

#[test]
fn a_mig_offer_consumes_its_memory_its_slices_and_its_engines() {
    let publication = a30();
    let (_, consumed) = consumption(device(&publication, "gpu0-mig-2g12gb-me-2"));
    let got: Vec<(&str, u64)> = consumed.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let expected: Vec<(&str, u64)> = vec![
        ("copy-engines", 2),
        ("decoders", 2),
        ("encoders", 0),
        ("jpeg-engines", 1),
        ("memory", 11968 * 1024 * 1024),
        ("memory-slice-2", 1),
        ("memory-slice-3", 1),
        ("multiprocessors", 28),
        ("ofa-engines", 1),
    ];
    assert_eq!(got, expected);
}

#[test]
fn counters_keep_overlapping_offers_apart_and_let_disjoint_ones_fit() {
    let publication = a30();
    let sets = counter_sets(&publication.slices);
    let set = &sets["pgpu-0000-01-00-0"];
    let used = |name: &str| consumption(device(&publication, name)).1;
    let fits = |names: &[&str]| {
        let each: Vec<_> = names.iter().map(|n| used(n)).collect();
        fit_together(set, &each.iter().collect::<Vec<_>>())
    };
    // Overlapping placements share memory-slice-1.
    assert!(!fits(&["gpu0-mig-2g12gb-0", "gpu0-mig-1g6gb-1"]));
    let overlap = used("gpu0-mig-2g12gb-0")["memory-slice-1"] + used("gpu0-mig-1g6gb-1")["memory-slice-1"];
    assert!(overlap > set["memory-slice-1"]);
    // Disjoint placements fit, up to the whole card.
    assert!(fits(&["gpu0-mig-2g12gb-0", "gpu0-mig-2g12gb-2"]));
    assert!(fits(&[
        "gpu0-mig-1g6gb-0",
        "gpu0-mig-1g6gb-1",
        "gpu0-mig-1g6gb-2",
        "gpu0-mig-1g6gb-3"
    ]));
    assert!(fits(&["gpu0-mig-2g12gb-0", "gpu0-mig-1g6gb-me-2", "gpu0-mig-1g6gb-3"]));
    // The card has one JPEG and one OFA engine: two +me profiles never fit, even on disjoint slices.
    assert!(!fits(&["gpu0-mig-1g6gb-me-0", "gpu0-mig-2g12gb-me-2"]));
    // The whole card excludes every MIG offer.
    assert!(fits(&["gpu0"]));
    assert!(!fits(&["gpu0", "gpu0-mig-1g6gb-3"]));
}

#[test]
fn attributes_name_the_card_for_selectors_dcgm_and_kubevirt() {
    let publication = a30();
    let string = |device: &str, name: &str| {
        let attributes = device_attributes(&publication, device);
        attributes.get(name).and_then(|a| a.string.clone())
    };
    let physical = device_attributes(&publication, "gpu0");
    let keys: Vec<&str> = physical.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "gpu.deckhouse.io/architecture",
            "gpu.deckhouse.io/baremetal",
            "gpu.deckhouse.io/ccMajor",
            "gpu.deckhouse.io/ccMinor",
            "gpu.deckhouse.io/device",
            "gpu.deckhouse.io/deviceType",
            "gpu.deckhouse.io/driverVersion",
            "gpu.deckhouse.io/pciAddress",
            "gpu.deckhouse.io/physicalGPU",
            "gpu.deckhouse.io/productName",
            "gpu.deckhouse.io/sharing",
            "gpu.deckhouse.io/type",
            "gpu.deckhouse.io/uuid",
            "gpu.deckhouse.io/vendor",
            "resource.kubernetes.io/numaNode",
            "resource.kubernetes.io/pciBusID",
            "resource.kubernetes.io/pcieRoot",
        ]
    );
    assert_eq!(
        string("gpu0", "gpu.deckhouse.io/deviceType").as_deref(),
        Some("Physical")
    );
    assert_eq!(string("gpu0", "gpu.deckhouse.io/type").as_deref(), Some("gpu"));
    assert_eq!(string("gpu0", "gpu.deckhouse.io/sharing").as_deref(), Some("Exclusive"));
    assert_eq!(string("gpu0", "gpu.deckhouse.io/device").as_deref(), Some("a30-pcie"));
    assert_eq!(
        string("gpu0", "resource.kubernetes.io/pciBusID").as_deref(),
        Some("0000:01:00.0")
    );
    assert_eq!(
        string("gpu0", "resource.kubernetes.io/pcieRoot").as_deref(),
        Some("pci0000:00")
    );
    assert_eq!(physical["resource.kubernetes.io/numaNode"].int, Some(0));
    assert_eq!(physical["gpu.deckhouse.io/ccMajor"].int, Some(8));
    assert_eq!(physical["gpu.deckhouse.io/baremetal"].bool, Some(true));
    // The mock's driver is 580.76.05; semver has no leading zeros.
    assert_eq!(
        physical["gpu.deckhouse.io/driverVersion"].version.as_deref(),
        Some("580.76.5")
    );

    let mig = "gpu0-mig-1g6gb-me-3";
    assert_eq!(string(mig, "gpu.deckhouse.io/deviceType").as_deref(), Some("MIG"));
    assert_eq!(string(mig, "gpu.deckhouse.io/type").as_deref(), Some("mig"));
    assert_eq!(string(mig, "gpu.deckhouse.io/sharing").as_deref(), Some("Exclusive"));
    assert_eq!(string(mig, "gpu.deckhouse.io/migProfile").as_deref(), Some("1g.6gb+me"));
    assert_eq!(string(mig, "gpu.deckhouse.io/profile").as_deref(), Some("1g.6gb+me"));
    assert_eq!(
        string(mig, "gpu.deckhouse.io/parentUUID").as_deref(),
        Some("GPU-010a3000-0000-4000-8000-a30000000001")
    );
    assert_eq!(
        string(mig, "gpu.deckhouse.io/uuid"),
        None,
        "a MIG offer has no UUID before it exists"
    );
    let capacity = device(&publication, mig).capacity.clone().unwrap();
    assert_eq!(
        capacity["gpu.deckhouse.io/memory"].value.0,
        (5952u64 * 1024 * 1024).to_string()
    );
    assert_eq!(capacity["gpu.deckhouse.io/multiprocessors"].value.0, "14");
    assert_eq!(capacity["gpu.deckhouse.io/jpegEngines"].value.0, "1");
    assert_eq!(
        device(&publication, "gpu0").capacity.as_ref().unwrap()["gpu.deckhouse.io/memory"]
            .value
            .0,
        (24576u64 * 1024 * 1024).to_string()
    );
}

fn device_attributes(
    publication: &dra_offers::Publication,
    name: &str,
) -> std::collections::BTreeMap<String, k8s_openapi::api::resource::v1::DeviceAttribute> {
    device(publication, name).attributes.clone().expect("attributes")
}

#[test]
fn cards_joined_by_nvlink_carry_their_domain_and_every_card_its_numa_node() {
    // HGX H100: every card reaches the four NVSwitches, so all eight share one domain, named by
    // the lowest switch address; the mock cards sit on two NUMA nodes of four.
    let publication = publish(
        &cards("h100-sxm5-80gb-x8.yaml", "h100-sxm5-80gb"),
        ALL,
        Layout::Combined,
    );
    for card in 0..8 {
        for name in [format!("gpu{card}"), format!("gpu{card}-mig-1g10gb-0")] {
            let attributes = device_attributes(&publication, &name);
            assert_eq!(
                attributes["gpu.deckhouse.io/nvlinkDomain"].string.as_deref(),
                Some("0000:05:00.0"),
                "{name}"
            );
            assert_eq!(
                attributes["resource.kubernetes.io/numaNode"].int,
                Some(card / 4),
                "{name}"
            );
        }
    }
    // An A30 without a bridge is in no domain.
    let attributes = device_attributes(&a30(), "gpu0");
    assert!(
        !attributes.contains_key("gpu.deckhouse.io/nvlinkDomain"),
        "{attributes:?}"
    );
}
