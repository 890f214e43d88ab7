//! Device attributes and capacities: what DeviceClass selectors (CEL) and the consumers on the node
//! (dcgm-exporter's DRA mapping, KubeVirt) read. Names are qualified: ours with
//! `gpu.deckhouse.io/`, the standard PCI one with `resource.kubernetes.io/`.
//!
//! The standard `resource.kubernetes.io/pciBusID` (the card's address),
//! `resource.kubernetes.io/pcieRoot` (its root complex, `pci<domain>:<bus>`, which the node agent
//! reads from the card's sysfs path) and `resource.kubernetes.io/numaNode` (an int, the card's sysfs
//! `numa_node`; KEP-6072, `StandardDeviceAttributeNUMANode` of
//! `k8s.io/dynamic-resource-allocation/deviceattribute` v0.37, which also says a card without NUMA
//! affinity, `-1`, must not publish it) are on every offer of the card: KubeVirt finds a
//! passed-through card by the first, topology-aware consumers (our best fit, `matchAttribute`
//! constraints) compare the others.

use std::collections::BTreeMap;

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::{MigEngines, MigProfile};
use k8s_openapi::api::resource::v1::{
    CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceAttribute, DeviceCapacity,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::card::CardOffering;
use crate::catalog::{DEVICE_TYPE_MIG, DEVICE_TYPE_PHYSICAL, VENDOR_NVIDIA};
use crate::names::ATTRIBUTE_DOMAIN;

/// An attribute's string and version values are at most 64 characters (API validation).
const ATTRIBUTE_VALUE_MAX: usize = 64;
const MIB: u64 = 1024 * 1024;

pub type Attributes = BTreeMap<String, DeviceAttribute>;
pub type Capacities = BTreeMap<String, DeviceCapacity>;

/// The capacity each share of a shared offer consumes part of (percent of the card).
pub const SHARE_PERCENT: &str = "sharePercent";

/// Attributes of the whole card offered with `sharing` (`Exclusive` for the plain offer). The
/// `sharing` attribute is on every offer, so a class selecting on it never meets a device without it.
pub fn physical_attributes(card: &CardOffering, sharing: SharingStrategy) -> Attributes {
    let mut attributes = common_attributes(card, DEVICE_TYPE_PHYSICAL, "gpu");
    put_string(&mut attributes, "uuid", &card.inventory.uuid);
    put_string(&mut attributes, "sharing", sharing.as_str());
    attributes
}

/// Attributes of one MIG placement of the card.
pub fn mig_attributes(card: &CardOffering, profile: &MigProfile) -> Attributes {
    let mut attributes = common_attributes(card, DEVICE_TYPE_MIG, "mig");
    put_string(&mut attributes, "migProfile", &profile.name);
    put_string(&mut attributes, "profile", &profile.name);
    put_string(&mut attributes, "parentUUID", &card.inventory.uuid);
    put_string(&mut attributes, "sharing", SharingStrategy::Exclusive.as_str());
    attributes
}

/// The whole card's capacity: its memory, and all of its `sharePercent` (see [`whole_share`]).
pub fn physical_capacity(card: &CardOffering) -> Capacities {
    Capacities::from([capacity("memory", card.inventory.memory_mib * MIB), whole_share()])
}

/// `sharePercent` 100 without a request policy, on every exclusive offer. For a device that allows
/// one allocation a capacity request is only a filter (`>=`), so this changes nothing there; but the
/// 1.34 scheduler gives up on a claim that requests `sharePercent` as soon as it meets a device
/// of the pool without that capacity, before it reaches the shared offer (observed on v1.34.4, see
/// the e2e test `scheduler_dra_shared_offers`).
fn whole_share() -> (String, DeviceCapacity) {
    capacity(SHARE_PERCENT, 100)
}

/// A shared offer's capacity. `sharePercent` (100; a share asks 1..100, 100 when it does not say)
/// is what the shares divide. `memory` stays a capacity so one CEL selector on
/// `capacity.memory` fits exclusive and shared offers alike, but on a device that allows multiple
/// allocations every capacity is consumable and one without a policy is consumed whole by each
/// share, which would stop the second share. So it gets a policy that consumes nothing by default
/// (a share that asks for memory has it counted against the card, in steps of 1 MiB).
pub fn shared_capacity(card: &CardOffering) -> Capacities {
    let memory = card.inventory.memory_mib * MIB;
    Capacities::from([
        consumable(SHARE_PERCENT, 100, 100, 1, 100, 1),
        consumable("memory", memory, 0, 0, memory, MIB),
    ])
}

/// A MIG placement's capacity: the profile's memory and engines, and `sharePercent` 100 (see
/// [`whole_share`]).
pub fn mig_capacity(profile: &MigProfile) -> Capacities {
    let MigEngines {
        multiprocessors,
        copy_engines,
        decoders,
        encoders,
        jpeg_engines,
        ofa_engines,
    } = profile.engines;
    Capacities::from([
        whole_share(),
        capacity("memory", profile.memory_mib * MIB),
        capacity("multiprocessors", multiprocessors.into()),
        capacity("copyEngines", copy_engines.into()),
        capacity("decoders", decoders.into()),
        capacity("encoders", encoders.into()),
        capacity("jpegEngines", jpeg_engines.into()),
        capacity("ofaEngines", ofa_engines.into()),
    ])
}

fn common_attributes(card: &CardOffering, device_type: &str, dcgm_type: &str) -> Attributes {
    let inventory = &card.inventory;
    let mut attributes = Attributes::new();
    put_string(&mut attributes, "vendor", VENDOR_NVIDIA);
    put_string(&mut attributes, "deviceType", device_type);
    put_string(&mut attributes, "type", dcgm_type);
    put_string(&mut attributes, "device", &card.device_label);
    put_string(&mut attributes, "pciAddress", &inventory.pci_address.to_string());
    put_string(&mut attributes, "productName", &inventory.product_name);
    put_string(&mut attributes, "physicalGPU", &card.physical_gpu);
    if let Some(domain) = &card.nvlink_domain {
        put_string(&mut attributes, "nvlinkDomain", domain);
    }
    if let Some(architecture) = &inventory.architecture {
        put_string(&mut attributes, "architecture", architecture);
    }
    if let Some(cc) = inventory.compute_capability {
        put(&mut attributes, "ccMajor", int(cc.major.into()));
        put(&mut attributes, "ccMinor", int(cc.minor.into()));
    }
    let driver_version = match semver(&inventory.driver_version) {
        Some(version) => DeviceAttribute {
            version: Some(version),
            ..DeviceAttribute::default()
        },
        None => string(&inventory.driver_version),
    };
    if fits(&driver_version) {
        put(&mut attributes, "driverVersion", driver_version);
    }
    if let Some(bare_metal) = card.bare_metal {
        put(
            &mut attributes,
            "baremetal",
            DeviceAttribute {
                bool: Some(bare_metal),
                ..DeviceAttribute::default()
            },
        );
    }
    attributes.insert(
        "resource.kubernetes.io/pciBusID".to_owned(),
        string(&inventory.pci_address.to_string()),
    );
    if let Some(root) = &card.pcie_root {
        attributes.insert("resource.kubernetes.io/pcieRoot".to_owned(), string(root));
    }
    if let Some(node) = card.numa_node.filter(|node| *node >= 0) {
        attributes.insert("resource.kubernetes.io/numaNode".to_owned(), int(node));
    }
    attributes
}

/// A driver version as semver: numeric parts without leading zeros, two parts padded to three
/// (`580.76.05` -> `580.76.5`, `550.54` -> `550.54.0`). `None` when it is not that shape.
pub(crate) fn semver(version: &str) -> Option<String> {
    let parts: Vec<&str> = version.trim().split('.').collect();
    if !parts
        .iter()
        .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let numbers: Vec<u64> = parts.iter().map(|p| p.parse().ok()).collect::<Option<_>>()?;
    match numbers.as_slice() {
        [major, minor] => Some(format!("{major}.{minor}.0")),
        [major, minor, patch] => Some(format!("{major}.{minor}.{patch}")),
        _ => None,
    }
}

/// Leaves out a string that the API would refuse (longer than 64 characters) rather than publish a
/// cut value that names something else.
fn put_string(attributes: &mut Attributes, name: &str, value: &str) {
    let attribute = string(value);
    if fits(&attribute) {
        put(attributes, name, attribute);
    }
}

fn put(attributes: &mut Attributes, name: &str, value: DeviceAttribute) {
    attributes.insert(format!("{ATTRIBUTE_DOMAIN}/{name}"), value);
}

fn fits(attribute: &DeviceAttribute) -> bool {
    [&attribute.string, &attribute.version]
        .into_iter()
        .flatten()
        .all(|value| value.len() <= ATTRIBUTE_VALUE_MAX)
}

fn string(value: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(value.to_owned()),
        ..DeviceAttribute::default()
    }
}

fn int(value: i64) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(value),
        ..DeviceAttribute::default()
    }
}

fn capacity(name: &str, value: u64) -> (String, DeviceCapacity) {
    (
        format!("{ATTRIBUTE_DOMAIN}/{name}"),
        DeviceCapacity {
            value: Quantity(value.to_string()),
            request_policy: None,
        },
    )
}

fn consumable(name: &str, value: u64, default: u64, min: u64, max: u64, step: u64) -> (String, DeviceCapacity) {
    let quantity = |value: u64| Quantity(value.to_string());
    let (name, mut capacity) = capacity(name, value);
    capacity.request_policy = Some(CapacityRequestPolicy {
        default: Some(quantity(default)),
        valid_range: Some(CapacityRequestPolicyRange {
            min: quantity(min),
            max: Some(quantity(max)),
            step: Some(quantity(step)),
        }),
        valid_values: None,
    });
    (name, capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_versions_become_semver_where_they_can() {
        assert_eq!(semver("580.76.05").as_deref(), Some("580.76.5"));
        assert_eq!(semver("550.54").as_deref(), Some("550.54.0"));
        assert_eq!(semver("535.183.01").as_deref(), Some("535.183.1"));
        for odd in ["580", "580.76.05.1", "580.x.1", "", "580..1", "+1.2.3"] {
            assert_eq!(semver(odd), None, "{odd:?}");
        }
    }
}
