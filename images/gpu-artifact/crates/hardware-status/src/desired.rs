//! What the handler wants in one PhysicalGPU's status: a pure function of the stored object and
//! what the vendor library said. The handler's fields are `capabilities`, `currentState.nvidia`
//! and the `HardwareHealthy` condition; everything else belongs to other components.

use std::collections::BTreeMap;

use gpu_api::{Capabilities, DriverType, NvidiaState, PhysicalGPU};
use gpu_health::CardHealth;
use gpu_vendor::{GpuInventory, PciAddress, VendorError};

use crate::DRIVER_READY;
use crate::health::{CardObservation, Verdict, hardware_healthy};
use crate::nvidia_status::{capabilities, nvidia_state};

/// The handler's part of a PhysicalGPU's status.
#[derive(Clone, Debug, PartialEq)]
pub struct HandlerStatus {
    pub capabilities: Option<Capabilities>,
    pub nvidia: Option<NvidiaState>,
    pub healthy: Verdict,
}

/// What the vendor library said on this pass.
#[derive(Clone, Copy, Debug)]
pub enum VendorView<'a> {
    /// Not loaded (missing library, driver not loaded); `reason` is the loader's error.
    Unavailable { reason: &'a str },
    Available {
        /// One entry per card on the nvidia driver.
        readings: &'a BTreeMap<PciAddress, Result<GpuInventory, VendorError>>,
        /// The health model's judgement of each card on the nvidia driver.
        health: &'a BTreeMap<PciAddress, CardHealth>,
        monitor_problem: Option<&'a str>,
    },
}

/// The card's PCI address as the node agent published it.
pub fn card_address(gpu: &PhysicalGPU) -> Option<PciAddress> {
    gpu.status.as_ref()?.pci_info.as_ref()?.address.parse().ok()
}

/// Whether the card is bound to the nvidia driver (only then can NVML see it).
pub fn on_nvidia_driver(gpu: &PhysicalGPU) -> bool {
    driver_type(gpu) == Some(DriverType::Nvidia)
}

fn driver_type(gpu: &PhysicalGPU) -> Option<DriverType> {
    gpu.status.as_ref()?.current_state.as_ref()?.driver_type
}

pub fn driver_ready(gpu: &PhysicalGPU) -> bool {
    gpu.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == DRIVER_READY))
        .is_some_and(|c| c.status == "True")
}

/// Capabilities and NVIDIA state only with DriverReady=True, the nvidia driver and a successful
/// read (seed 4.2.1): a failed read removes them rather than leave a stale snapshot behind.
pub fn desired_status(gpu: &PhysicalGPU, view: VendorView<'_>) -> HandlerStatus {
    let Some(address) = card_address(gpu) else {
        return HandlerStatus {
            capabilities: None,
            nvidia: None,
            healthy: Verdict::new(
                "Unknown",
                "PCIAddressUnknown",
                "the node agent has not published the card's PCI address yet".to_owned(),
            ),
        };
    };
    let driver = match driver_type(gpu) {
        Some(DriverType::Nvidia) => None,
        Some(DriverType::Vfio) => Some("bound to vfio-pci"),
        Some(DriverType::Rocm) => Some("bound to amdgpu"),
        None => Some("not bound to a driver"),
    };
    let (observation, reading) = match (view, driver) {
        (VendorView::Unavailable { reason }, _) => (CardObservation::LibraryUnavailable { reason }, None),
        (VendorView::Available { .. }, Some(driver)) => (CardObservation::NotOnVendorDriver { driver }, None),
        (
            VendorView::Available {
                readings,
                health,
                monitor_problem,
            },
            None,
        ) => {
            let reading = readings.get(&address);
            let observation = match (reading, health.get(&address)) {
                (Some(answer), Some(health)) => CardObservation::Queried {
                    answer: answer.as_ref().map(|card| card.uuid.as_str()),
                    health,
                    monitor_problem,
                },
                _ => CardObservation::NotQueried,
            };
            (observation, reading.and_then(|r| r.as_ref().ok()))
        }
    };
    let enrich = reading.filter(|_| driver_ready(gpu));
    HandlerStatus {
        capabilities: enrich.map(capabilities),
        nvidia: enrich.map(nvidia_state),
        healthy: hardware_healthy(&address, observation),
    }
}

#[cfg(test)]
mod tests {
    use gpu_health::{CardRecord, HealthPolicy, assess};
    use gpu_vendor::{ComputeCapability, HealthEventKind, HealthReading};

    use super::*;
    use crate::test_gpus::reported_gpu;

    const ADDRESS: &str = "0000:01:00.0";

    fn gpu(driver: Option<DriverType>, driver_ready: &str) -> PhysicalGPU {
        reported_gpu("w1-0-10de-20b7", ADDRESS, driver, driver_ready)
    }

    fn reading() -> BTreeMap<PciAddress, Result<GpuInventory, VendorError>> {
        let card = GpuInventory {
            pci_address: ADDRESS.parse().unwrap(),
            uuid: "GPU-a30".into(),
            product_name: "NVIDIA A30".into(),
            architecture: Some("Ampere".into()),
            board_part_number: None,
            memory_mib: 24576,
            compute_capability: Some(ComputeCapability { major: 8, minor: 0 }),
            driver_version: "580.76.05".into(),
            runtime_version: Some("13.0".into()),
            power_limits: None,
            mig: None,
            nvlink_remotes: Vec::new(),
        };
        BTreeMap::from([(card.pci_address, Ok(card))])
    }

    fn health(xids: &[u64]) -> BTreeMap<PciAddress, CardHealth> {
        let policy = HealthPolicy::default();
        let mut record = CardRecord::default();
        for xid in xids {
            let kind = HealthEventKind::Xid {
                xid: *xid,
                gpu_instance_id: None,
                compute_instance_id: None,
            };
            record.record_event(&kind, &policy, 0);
        }
        let assessed = assess(&mut record, Some(&HealthReading::default()), &policy, 0);
        BTreeMap::from([(ADDRESS.parse().unwrap(), assessed)])
    }

    fn available<'a>(
        readings: &'a BTreeMap<PciAddress, Result<GpuInventory, VendorError>>,
        health: &'a BTreeMap<PciAddress, CardHealth>,
    ) -> VendorView<'a> {
        VendorView::Available {
            readings,
            health,
            monitor_problem: None,
        }
    }

    #[test]
    fn driver_ready_and_the_nvidia_driver_bring_capabilities_and_state() {
        let readings = reading();
        let ledger = health(&[]);
        let want = desired_status(&gpu(Some(DriverType::Nvidia), "True"), available(&readings, &ledger));
        assert_eq!(want.capabilities.unwrap().product_name.as_deref(), Some("NVIDIA A30"));
        assert_eq!(want.nvidia.unwrap().gpu_uuid.as_deref(), Some("GPU-a30"));
        assert_eq!(want.healthy.status, "True");
    }

    #[test]
    fn without_driver_ready_only_health_is_reported() {
        let readings = reading();
        let ledger = health(&[]);
        for driver_ready in ["False", "Unknown"] {
            let want = desired_status(
                &gpu(Some(DriverType::Nvidia), driver_ready),
                available(&readings, &ledger),
            );
            assert_eq!((want.capabilities, want.nvidia), (None, None));
            assert_eq!(want.healthy.status, "True");
        }
    }

    #[test]
    fn a_card_off_the_nvidia_driver_or_without_nvml_gets_nothing_but_unknown_health() {
        let readings = reading();
        let ledger = health(&[]);
        let vfio = desired_status(&gpu(Some(DriverType::Vfio), "True"), available(&readings, &ledger));
        assert_eq!((vfio.capabilities, vfio.healthy.reason), (None, "NotOnNvidiaDriver"));
        let missing = desired_status(
            &gpu(Some(DriverType::Nvidia), "True"),
            VendorView::Unavailable { reason: "no library" },
        );
        assert_eq!((missing.capabilities, missing.nvidia), (None, None));
        assert_eq!(
            (missing.healthy.status, missing.healthy.reason),
            ("Unknown", "NVMLUnavailable")
        );
    }

    #[test]
    fn a_critical_xid_keeps_capabilities_but_turns_health_false() {
        let readings = reading();
        let ledger = health(&[79]);
        let want = desired_status(&gpu(Some(DriverType::Nvidia), "True"), available(&readings, &ledger));
        assert!(want.capabilities.is_some());
        assert_eq!((want.healthy.status, want.healthy.reason), ("False", "XidCritical"));
        assert!(
            want.healthy
                .message
                .starts_with("GPU 0000:01:00.0 (GPU-a30): critical Xid 79 (GPU has fallen off the bus) since"),
            "{}",
            want.healthy.message
        );
    }
}
