//! The `PhysicalGPU` custom resource (`gpu.deckhouse.io/v1alpha1`, cluster-scoped).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{Capabilities, NvidiaState};

/// Empty on purpose: a PhysicalGPU has no desired state.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "gpu.deckhouse.io",
    version = "v1alpha1",
    kind = "PhysicalGPU",
    plural = "physicalgpus",
    shortname = "pgpu",
    label("heritage", "deckhouse"),
    label("module", "gpu"),
    status = "PhysicalGPUStatus",
    doc = "PhysicalGPU is the inventory of one physical GPU on one node. It appears when the node agent finds the PCI device and disappears with it. It has no desired state: the card's mode follows the allocations of Dynamic Resource Allocation and is changed only on the node.",
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".status.nodeInfo.nodeName"}"#,
    printcolumn = r#"{"name":"Model","type":"string","jsonPath":".metadata.labels.gpu\\.deckhouse\\.io/device"}"#,
    printcolumn = r#"{"name":"PCI","type":"string","jsonPath":".status.pciInfo.address"}"#,
    printcolumn = r#"{"name":"Driver","type":"string","jsonPath":".status.currentState.driverType"}"#,
    printcolumn = r#"{"name":"DriverReady","type":"string","jsonPath":".status.conditions[?(@.type==\"DriverReady\")].status"}"#,
    printcolumn = r#"{"name":"Healthy","type":"string","jsonPath":".status.conditions[?(@.type==\"HardwareHealthy\")].status"}"#,
    printcolumn = r#"{"name":"MIG","type":"string","jsonPath":".status.currentState.nvidia.mig.mode"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct PhysicalGPUSpec {}

/// What is known about the card. Every field is absent while its source is unavailable.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalGPUStatus {
    /// The node and its operating system, from the node agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
    /// The PCI identity of the card, from sysfs and pci.ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_info: Option<PciInfo>,
    /// What the card can do, from the vendor library; present only while DriverReady is True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// DriverReady (from the driver validator) and HardwareHealthy (from the node's health monitor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Option<Vec<Condition>>,
    /// The card's current driver binding and vendor state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_state: Option<CurrentState>,
}

/// The node the card is in.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// Name of the Kubernetes node.
    pub node_name: String,
    /// Operating system, from /etc/os-release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<OsInfo>,
    /// Kernel release (`uname -r`), from /proc/sys/kernel/osrelease.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_release: Option<String>,
    /// Whether the node is bare metal, by the DMI heuristic; false when DMI cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bare_metal: Option<bool>,
}

/// Operating system identity from /etc/os-release.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OsInfo {
    /// `ID`, e.g. `ubuntu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `VERSION_ID`, e.g. `22.04`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `NAME`, e.g. `Ubuntu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// PCI identity of the card.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciInfo {
    /// PCI address (domain:bus:device.function), e.g. `0000:02:00.0`.
    pub address: String,
    /// PCI class.
    pub class: PciClass,
    /// Vendor.
    pub vendor: PciId,
    /// Device (model).
    pub device: PciId,
    /// Subsystem vendor and device: the board maker's identity of the card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subsystem: Option<PciSubsystem>,
    /// NUMA node the card is attached to; absent when the platform does not report one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i64>,
    /// IOMMU group of the card; absent when the IOMMU is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu_group: Option<i64>,
    /// The PCIe root complex the card hangs below, `pci<domain>:<bus>` (published as the device
    /// attribute `resource.kubernetes.io/pcieRoot`); absent when sysfs does not show one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie_root: Option<String>,
}

/// PCI class code and its name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PciClass {
    /// Class and subclass in hex, e.g. `0302`.
    pub code: String,
    /// Name from pci.ids, e.g. `3D controller`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A PCI id and its name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PciId {
    /// Id in lowercase hex, e.g. `10de`.
    pub id: String,
    /// Name from pci.ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Subsystem ids of the card.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciSubsystem {
    /// Subsystem vendor id in lowercase hex.
    #[serde(rename = "vendorID")]
    pub vendor_id: String,
    /// Subsystem device id in lowercase hex.
    #[serde(rename = "deviceID")]
    pub device_id: String,
}

/// Which driver the card is bound to.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum DriverType {
    /// The NVIDIA kernel driver (`nvidia`).
    Nvidia,
    /// `vfio-pci`, for passthrough to a virtual machine.
    #[serde(rename = "VFIO")]
    Vfio,
    /// The AMD kernel driver (`amdgpu`).
    #[serde(rename = "ROCm")]
    Rocm,
}

/// Current driver binding and vendor state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CurrentState {
    /// Driver the card is bound to, from sysfs; absent when unbound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_type: Option<DriverType>,
    /// NVIDIA state from NVML; present only while DriverReady is True and the card is on the nvidia driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvidiaState>,
}
