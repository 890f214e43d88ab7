//! What the kubelet is told about each device: the verdict of the device's card (the health model's
//! `HardwareHealthy`) for every device of the node's cards, published or withheld, so a Pod that
//! holds a device of a card gone unhealthy learns it. A MIG device shares its card's verdict.

use std::collections::BTreeMap;

use dra_offers::DeviceCatalog;
use gpu_vendor::PciAddress;
use hardware_status::health::Verdict;
use kubelet_plugin::{DeviceHealthReport, ReportedHealth};
use tokio::sync::watch;

/// One report per device of `devices`, by its card's verdict (Unknown for a card without one).
pub fn device_reports(
    pool: &str,
    devices: &DeviceCatalog,
    cards: &BTreeMap<PciAddress, Verdict>,
) -> Vec<DeviceHealthReport> {
    devices
        .iter()
        .map(|(name, offered)| {
            let verdict = cards.get(offered.pci_address());
            let health = match verdict.map(|v| v.status) {
                Some("True") => ReportedHealth::Healthy,
                Some("False") => ReportedHealth::Unhealthy,
                _ => ReportedHealth::Unknown,
            };
            DeviceHealthReport {
                pool_name: pool.to_owned(),
                device_name: name.clone(),
                health,
                message: verdict.map(|v| v.message.clone()).unwrap_or_default(),
            }
        })
        .collect()
}

/// Keeps `feed` equal to the reports of the latest devices and verdicts, until either sender goes.
pub async fn follow(
    pool: String,
    mut devices: watch::Receiver<DeviceCatalog>,
    mut cards: watch::Receiver<BTreeMap<PciAddress, Verdict>>,
    feed: watch::Sender<Vec<DeviceHealthReport>>,
) {
    loop {
        let reports = device_reports(&pool, &devices.borrow_and_update(), &cards.borrow_and_update());
        feed.send_if_modified(|current| {
            let changed = *current != reports;
            if changed {
                *current = reports;
            }
            changed
        });
        tokio::select! {
            changed = devices.changed() => if changed.is_err() { return },
            changed = cards.changed() => if changed.is_err() { return },
        }
    }
}

#[cfg(test)]
mod tests {
    use dra_offers::OfferedDevice;
    use gpu_vendor::MigPlacement;

    use super::*;

    #[test]
    fn devices_take_their_cards_verdict() {
        let sick: PciAddress = "0000:01:00.0".parse().unwrap();
        let fine: PciAddress = "0000:02:00.0".parse().unwrap();
        let devices = DeviceCatalog::from([
            (
                "gpu0".to_owned(),
                OfferedDevice::Physical {
                    pci_address: sick,
                    uuid: "GPU-0".into(),
                    physical_gpu: "n-0".into(),
                },
            ),
            (
                "gpu0-mig-1g6gb-0".to_owned(),
                OfferedDevice::Mig {
                    pci_address: sick,
                    parent_uuid: "GPU-0".into(),
                    physical_gpu: "n-0".into(),
                    profile_id: 14,
                    profile_name: "1g.6gb".into(),
                    placement: MigPlacement { start: 0, size: 1 },
                },
            ),
            (
                "gpu1".to_owned(),
                OfferedDevice::Physical {
                    pci_address: fine,
                    uuid: "GPU-1".into(),
                    physical_gpu: "n-1".into(),
                },
            ),
        ]);
        let cards = BTreeMap::from([(sick, Verdict::new("False", "XidCritical", "critical Xid 79".into()))]);
        let reports = device_reports("gpus/n", &devices, &cards);
        let seen: Vec<(&str, ReportedHealth, &str)> = reports
            .iter()
            .map(|r| (r.device_name.as_str(), r.health, r.message.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("gpu0", ReportedHealth::Unhealthy, "critical Xid 79"),
                ("gpu0-mig-1g6gb-0", ReportedHealth::Unhealthy, "critical Xid 79"),
                ("gpu1", ReportedHealth::Unknown, ""),
            ]
        );
        assert!(reports.iter().all(|r| r.pool_name == "gpus/n"));
    }
}
