//! PhysicalGPUs as the node agent and gpu-controller leave them, for this crate's unit tests.

use gpu_api::{CurrentState, DriverType, NodeInfo, PciInfo, PhysicalGPU, PhysicalGPUStatus, labels};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// An A30 on a bare-metal node at `address`, bound to `driver`, with DriverReady `driver_ready`.
pub(crate) fn reported_gpu(name: &str, address: &str, driver: Option<DriverType>, driver_ready: &str) -> PhysicalGPU {
    let mut gpu = PhysicalGPU::new(name, Default::default());
    gpu.metadata.labels = Some([(labels::DEVICE.to_owned(), "a30-pcie".to_owned())].into());
    gpu.status = Some(PhysicalGPUStatus {
        pci_info: Some(PciInfo {
            address: address.into(),
            ..PciInfo::default()
        }),
        node_info: Some(NodeInfo {
            bare_metal: Some(true),
            ..NodeInfo::default()
        }),
        current_state: Some(CurrentState {
            driver_type: driver,
            nvidia: None,
        }),
        conditions: Some(vec![Condition {
            type_: crate::DRIVER_READY.into(),
            status: driver_ready.into(),
            reason: "ValidatorReady".into(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
            observed_generation: None,
        }]),
        ..PhysicalGPUStatus::default()
    });
    gpu
}
