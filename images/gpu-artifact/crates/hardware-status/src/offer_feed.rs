//! Which of this node's cards may be offered through DRA, as the handler saw them on its latest
//! pass: the cards with DriverReady=True on the nvidia driver that the handler could describe (its
//! vendor reading succeeded, or, for a card that fell off the bus, the last reading). An unhealthy
//! card is still offered, with the taints its health calls for: NoSchedule (NoExecute where the
//! ModuleConfig asks) for critical causes, None for informational ones. The publisher withholds it
//! instead where the API server cannot carry taints.
//!
//! The publisher reads this feed; the handler only computes it, it never publishes.

use std::collections::BTreeMap;

use dra_offers::{CardOffering, EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE, EFFECT_NONE, nvlink_domains};
use gpu_api::{PhysicalGPU, labels};
use gpu_health::{CardHealth, HealthPolicy, Severity};
use gpu_vendor::{GpuInventory, PciAddress};
use k8s_openapi::api::resource::v1::DeviceTaint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use crate::desired::{card_address, driver_ready, on_nvidia_driver};

/// At most this many taints per device (the API's limit on 1.34).
const MAX_TAINTS: usize = 4;

/// The offerable cards among `gpus`, described by `inventories` and tainted by `health`, sorted by
/// card index.
pub fn offerable_cards<'a>(
    gpus: impl IntoIterator<Item = &'a PhysicalGPU>,
    inventories: &BTreeMap<PciAddress, GpuInventory>,
    health: &BTreeMap<PciAddress, CardHealth>,
    policy: &HealthPolicy,
) -> Vec<CardOffering> {
    // Over every card NVML describes, offered or not: a domain's name does not depend on which.
    let domains = nvlink_domains(&inventories.values().collect::<Vec<_>>());
    let mut cards: Vec<CardOffering> = gpus
        .into_iter()
        .filter(|gpu| driver_ready(gpu) && on_nvidia_driver(gpu))
        .filter_map(|gpu| {
            let address = card_address(gpu)?;
            let inventory = inventories.get(&address)?.clone();
            Some(CardOffering {
                physical_gpu: gpu.name_any(),
                index: card_index(&gpu.name_any())?,
                device_label: gpu.labels().get(labels::DEVICE).cloned().unwrap_or_default(),
                bare_metal: gpu
                    .status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .and_then(|n| n.bare_metal),
                pcie_root: pci_info(gpu).and_then(|p| p.pcie_root.clone()),
                numa_node: pci_info(gpu).and_then(|p| p.numa_node),
                nvlink_domain: domains.get(&address).cloned(),
                inventory,
                taints: health.get(&address).map(|h| taints(h, policy)).unwrap_or_default(),
            })
        })
        .collect();
    cards.sort_by_key(|card| card.index);
    cards
}

/// The card's health as device taints, with the time each cause was first seen.
fn taints(health: &CardHealth, policy: &HealthPolicy) -> Vec<DeviceTaint> {
    health
        .taints(MAX_TAINTS)
        .into_iter()
        .map(|taint| DeviceTaint {
            key: taint.spec.key,
            value: Some(taint.spec.value),
            effect: match taint.severity {
                Severity::Critical if policy.no_execute => EFFECT_NO_EXECUTE,
                Severity::Critical => EFFECT_NO_SCHEDULE,
                Severity::Informational => EFFECT_NONE,
            }
            .to_owned(),
            time_added: k8s_openapi::jiff::Timestamp::from_second(taint.since).ok().map(Time),
        })
        .collect()
}

/// The card's PCI facts the node agent recorded (`status.pciInfo`).
fn pci_info(gpu: &PhysicalGPU) -> Option<&gpu_api::PciInfo> {
    gpu.status.as_ref()?.pci_info.as_ref()
}

/// The `<index>` of a PhysicalGPU name `<node>-<index>-<vendor>-<device>` (node names may contain
/// dashes, so it is read from the end).
fn card_index(name: &str) -> Option<u32> {
    name.rsplit('-').nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use gpu_api::DriverType;
    use gpu_health::{CardRecord, assess};
    use gpu_vendor::{HealthEventKind, HealthReading, RemappedRows};

    use super::*;
    use crate::test_gpus::reported_gpu;

    fn gpu(name: &str, address: &str, driver_ready: &str) -> PhysicalGPU {
        reported_gpu(name, address, Some(DriverType::Nvidia), driver_ready)
    }

    fn inventory(address: &str) -> GpuInventory {
        GpuInventory {
            pci_address: address.parse().unwrap(),
            uuid: format!("GPU-{address}"),
            product_name: "NVIDIA A30".into(),
            architecture: None,
            board_part_number: None,
            memory_mib: 24576,
            compute_capability: None,
            driver_version: "580.76.05".into(),
            runtime_version: None,
            power_limits: None,
            mig: None,
            nvlink_remotes: Vec::new(),
        }
    }

    fn assessed(xid: Option<u64>, reading: HealthReading, policy: &HealthPolicy) -> CardHealth {
        let mut record = CardRecord::default();
        if let Some(xid) = xid {
            let kind = HealthEventKind::Xid {
                xid,
                gpu_instance_id: None,
                compute_instance_id: None,
            };
            record.record_event(&kind, policy, 1_700_000_000);
        }
        assess(&mut record, Some(&reading), policy, 1_700_000_100)
    }

    #[test]
    fn ready_cards_the_handler_can_describe_are_offered_unhealthy_ones_tainted() {
        let addresses = ["0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"];
        let mut placed = gpu("w-0-10de-20b7", addresses[1], "True");
        let pci = placed.status.as_mut().unwrap().pci_info.as_mut().unwrap();
        (pci.pcie_root, pci.numa_node) = (Some("pci0000:00".into()), Some(1));
        let gpus = [
            gpu("w-1-10de-20b7", addresses[0], "True"),
            placed,
            gpu("w-2-10de-20b7", addresses[2], "False"),
            gpu("w-3-10de-20b7", addresses[3], "True"),
        ];
        // The fourth card could not be described: no inventory.
        let mut inventories: BTreeMap<PciAddress, GpuInventory> = addresses[..3]
            .iter()
            .map(|a| (a.parse().unwrap(), inventory(a)))
            .collect();
        // The first two cards share an NVSwitch; the third, not offered, too.
        for address in &addresses[..3] {
            let card = inventories.get_mut(&address.parse().unwrap()).unwrap();
            card.nvlink_remotes = vec!["0000:05:00.0".parse().unwrap()];
        }
        let policy = HealthPolicy::default();
        let noted = HealthReading {
            remapped_rows: Some(RemappedRows {
                pending: true,
                ..RemappedRows::default()
            }),
            ..HealthReading::default()
        };
        let health = BTreeMap::from([
            (addresses[0].parse().unwrap(), assessed(Some(79), noted, &policy)),
            (
                addresses[1].parse().unwrap(),
                assessed(None, HealthReading::default(), &policy),
            ),
        ]);
        let offered = offerable_cards(&gpus, &inventories, &health, &policy);
        let names: Vec<(&str, u32)> = offered.iter().map(|c| (c.physical_gpu.as_str(), c.index)).collect();
        assert_eq!(names, vec![("w-0-10de-20b7", 0), ("w-1-10de-20b7", 1)]);
        assert_eq!(offered[0].inventory.uuid, "GPU-0000:02:00.0");
        assert_eq!(
            (offered[0].device_label.as_str(), offered[0].bare_metal),
            ("a30-pcie", Some(true))
        );
        assert_eq!(
            (offered[0].pcie_root.as_deref(), offered[0].numa_node),
            (Some("pci0000:00"), Some(1)),
            "where the node agent found the card"
        );
        assert_eq!((offered[1].pcie_root.as_deref(), offered[1].numa_node), (None, None));
        assert_eq!(
            offered.iter().map(|c| c.nvlink_domain.as_deref()).collect::<Vec<_>>(),
            [Some("0000:01:00.0"), Some("0000:01:00.0")],
            "named by the lowest address of the domain, here a card"
        );
        assert!(offered[0].taints.is_empty(), "a healthy card carries no taint");
        let taints: Vec<(&str, Option<&str>, &str)> = offered[1]
            .taints
            .iter()
            .map(|t| (t.key.as_str(), t.value.as_deref(), t.effect.as_str()))
            .collect();
        assert_eq!(
            taints,
            [
                ("gpu.deckhouse.io/xid", Some("79"), "NoSchedule"),
                ("gpu.deckhouse.io/row-remap", Some("pending"), "None")
            ]
        );
        assert_eq!(
            offered[1].taints[0].time_added.as_ref().unwrap().0.to_string(),
            "2023-11-14T22:13:20Z",
            "the time the Xid was first seen"
        );
        let evicting = HealthPolicy {
            no_execute: true,
            ..HealthPolicy::default()
        };
        let offered = offerable_cards(&gpus, &inventories, &health, &evicting);
        assert_eq!(offered[1].taints[0].effect, "NoExecute");
        assert_eq!(offered[1].taints[1].effect, "None", "a note never evicts");
    }

    #[test]
    fn the_index_is_read_from_the_end_of_the_name() {
        assert_eq!(card_index("worker-gpu-1-3-10de-20b7"), Some(3));
        assert_eq!(card_index("n-0-10de-2331"), Some(0));
        assert_eq!(card_index("no-index"), None);
    }
}
