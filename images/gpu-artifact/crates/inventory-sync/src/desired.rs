//! What should exist, computed from one look at the host. Pure: no I/O.

use std::collections::BTreeMap;

use gpu_api::labels::{self, physical_gpu_name};
use gpu_api::{
    CurrentState, DriverType, NodeInfo, OsInfo, PciClass, PciId, PciInfo, PciSubsystem, PhysicalGPU, PhysicalGPUSpec,
    PhysicalGPUStatus,
};
use host_inventory::{HostFacts, PciGpu, Scan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::core::ObjectMeta;

/// The Node the agent runs on: PhysicalGPUs are owned by it, so a deleted Node takes them along.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeIdentity {
    pub name: String,
    pub uid: String,
}

/// The PhysicalGPU objects this node should have, by name order.
pub fn desired_gpus(node: &NodeIdentity, scan: &Scan, facts: &HostFacts) -> Vec<PhysicalGPU> {
    scan.gpus.iter().map(|gpu| physical_gpu(node, gpu, facts)).collect()
}

fn physical_gpu(node: &NodeIdentity, gpu: &PciGpu, facts: &HostFacts) -> PhysicalGPU {
    let name = physical_gpu_name(&node.name, gpu.index, &gpu.vendor_id, &gpu.device_id);
    let mut object = PhysicalGPU::new(&name, PhysicalGPUSpec {});
    object.metadata = ObjectMeta {
        name: Some(name),
        labels: Some(BTreeMap::from([
            (labels::NODE.to_owned(), node.name.clone()),
            (labels::VENDOR.to_owned(), vendor_label(&gpu.vendor_id).to_owned()),
            (labels::DEVICE.to_owned(), labels::label_value(&gpu.model_label)),
        ])),
        owner_references: Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: node.name.clone(),
            uid: node.uid.clone(),
            ..OwnerReference::default()
        }]),
        ..ObjectMeta::default()
    };
    object.status = Some(PhysicalGPUStatus {
        node_info: Some(node_info(&node.name, facts)),
        pci_info: Some(pci_info(gpu)),
        current_state: driver_type(gpu.driver.as_ref().map(|d| d.name())).map(|driver_type| CurrentState {
            driver_type: Some(driver_type),
            nvidia: None,
        }),
        ..PhysicalGPUStatus::default()
    });
    object
}

/// `nvidia`, `amd`, `intel`, or the raw vendor id for anyone else.
pub fn vendor_label(vendor_id: &str) -> &str {
    match vendor_id.to_ascii_lowercase().as_str() {
        "10de" => "nvidia",
        "1002" => "amd",
        "8086" => "intel",
        _ => vendor_id,
    }
}

/// The driver binding as the API reports it; absent when unbound or bound to something we do not
/// manage (e.g. nouveau), so nobody mistakes such a card for a usable one.
pub fn driver_type(driver: Option<&str>) -> Option<DriverType> {
    match driver? {
        "nvidia" => Some(DriverType::Nvidia),
        "vfio-pci" => Some(DriverType::Vfio),
        "amdgpu" => Some(DriverType::Rocm),
        _ => None,
    }
}

fn node_info(node: &str, facts: &HostFacts) -> NodeInfo {
    let os = OsInfo {
        id: facts.os_id.clone(),
        version: facts.os_version.clone(),
        name: facts.os_name.clone(),
    };
    NodeInfo {
        node_name: node.to_owned(),
        os: (os != OsInfo::default()).then_some(os),
        kernel_release: facts.kernel_release.clone(),
        bare_metal: Some(facts.bare_metal),
    }
}

fn pci_info(gpu: &PciGpu) -> PciInfo {
    PciInfo {
        address: gpu.address.clone(),
        class: PciClass {
            code: gpu.class_code.clone(),
            name: gpu.class_name.clone(),
        },
        vendor: PciId {
            id: gpu.vendor_id.clone(),
            name: gpu.vendor_name.clone(),
        },
        device: PciId {
            id: gpu.device_id.clone(),
            name: gpu.device_name.clone(),
        },
        subsystem: match (&gpu.subsystem_vendor_id, &gpu.subsystem_device_id) {
            (Some(vendor), Some(device)) => Some(PciSubsystem {
                vendor_id: vendor.clone(),
                device_id: device.clone(),
            }),
            _ => None,
        },
        numa_node: gpu.numa_node.map(i64::from),
        iommu_group: gpu.iommu_group.map(i64::from),
        pcie_root: gpu.pcie_root.clone(),
    }
}

/// Node labels for the driver installer and for VFIO decisions.
pub fn node_labels(facts: &HostFacts) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    if let Some(id) = &facts.os_id {
        labels.insert(labels::NODE_OS_ID.to_owned(), labels::label_value(id));
    }
    if let Some(version) = &facts.os_version {
        labels.insert(labels::NODE_OS_VERSION.to_owned(), labels::label_value(version));
    }
    if let Some(kernel) = &facts.kernel_release {
        labels.insert(labels::NODE_KERNEL_VERSION.to_owned(), labels::label_value(kernel));
    }
    labels.insert(labels::NODE_BAREMETAL.to_owned(), facts.bare_metal.to_string());
    labels
}
