//! Which of this node's cards may be offered through DRA, as the handler saw them on its latest
//! pass: the cards with DriverReady=True on the nvidia driver whose vendor reading succeeded and
//! whose `HardwareHealthy` is not False (ARCHITECTURE.md section 3 resolves the seed's "True" to
//! "not False": the condition is Unknown until the handler has looked).
//!
//! The publisher reads this feed; the handler only computes it, it never publishes.

use std::collections::BTreeMap;

use dra_offers::CardOffering;
use gpu_api::{PhysicalGPU, labels};
use gpu_vendor::{GpuInventory, PciAddress, VendorError};
use kube::ResourceExt;

use crate::desired::{HandlerStatus, card_address, driver_ready, on_nvidia_driver};

/// The offerable cards among `gpus`, each paired with the handler status computed for it on this
/// pass, sorted by card index.
pub fn offerable_cards<'a>(
    gpus: impl IntoIterator<Item = (&'a PhysicalGPU, &'a HandlerStatus)>,
    readings: &BTreeMap<PciAddress, Result<GpuInventory, VendorError>>,
) -> Vec<CardOffering> {
    let mut cards: Vec<CardOffering> = gpus
        .into_iter()
        .filter(|(gpu, status)| driver_ready(gpu) && on_nvidia_driver(gpu) && status.healthy.status != "False")
        .filter_map(|(gpu, _)| {
            let inventory = readings.get(&card_address(gpu)?)?.as_ref().ok()?.clone();
            Some(CardOffering {
                physical_gpu: gpu.name_any(),
                index: card_index(&gpu.name_any())?,
                device_label: gpu.labels().get(labels::DEVICE).cloned().unwrap_or_default(),
                bare_metal: gpu
                    .status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .and_then(|n| n.bare_metal),
                pcie_root: gpu
                    .status
                    .as_ref()
                    .and_then(|s| s.pci_info.as_ref())
                    .and_then(|p| p.pcie_root.clone()),
                inventory,
            })
        })
        .collect();
    cards.sort_by_key(|card| card.index);
    cards
}

/// The `<index>` of a PhysicalGPU name `<node>-<index>-<vendor>-<device>` (node names may contain
/// dashes, so it is read from the end).
fn card_index(name: &str) -> Option<u32> {
    name.rsplit('-').nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use gpu_api::DriverType;

    use super::*;
    use crate::health::Verdict;
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
        }
    }

    fn status(healthy: &'static str) -> HandlerStatus {
        HandlerStatus {
            capabilities: None,
            nvidia: None,
            healthy: Verdict::new(healthy, "Test", String::new()),
        }
    }

    #[test]
    fn only_ready_answering_cards_that_are_not_unhealthy_are_offered() {
        let addresses = [
            "0000:01:00.0",
            "0000:02:00.0",
            "0000:03:00.0",
            "0000:04:00.0",
            "0000:05:00.0",
        ];
        let gpus = [
            gpu("w-1-10de-20b7", addresses[0], "True"),
            gpu("w-0-10de-20b7", addresses[1], "True"),
            gpu("w-2-10de-20b7", addresses[2], "False"),
            gpu("w-3-10de-20b7", addresses[3], "True"),
            gpu("w-4-10de-20b7", addresses[4], "True"),
        ];
        let statuses = [
            status("True"),
            status("Unknown"),
            status("True"),
            status("False"),
            status("True"),
        ];
        let mut readings: BTreeMap<PciAddress, Result<GpuInventory, VendorError>> = addresses[..4]
            .iter()
            .map(|a| (a.parse().unwrap(), Ok(inventory(a))))
            .collect();
        readings.insert(
            addresses[4].parse().unwrap(),
            Err(VendorError::Failed {
                call: "reading".into(),
                reason: "gone".into(),
            }),
        );
        let offered = offerable_cards(gpus.iter().zip(&statuses), &readings);
        let names: Vec<(&str, u32)> = offered.iter().map(|c| (c.physical_gpu.as_str(), c.index)).collect();
        // DriverReady=False, HardwareHealthy=False and a failed reading are left out; Unknown is offered.
        assert_eq!(names, vec![("w-0-10de-20b7", 0), ("w-1-10de-20b7", 1)]);
        assert_eq!(offered[0].inventory.uuid, "GPU-0000:02:00.0");
        assert_eq!(
            (offered[0].device_label.as_str(), offered[0].bare_metal),
            ("a30-pcie", Some(true))
        );
    }

    #[test]
    fn the_index_is_read_from_the_end_of_the_name() {
        assert_eq!(card_index("worker-gpu-1-3-10de-20b7"), Some(3));
        assert_eq!(card_index("n-0-10de-2331"), Some(0));
        assert_eq!(card_index("no-index"), None);
    }
}
