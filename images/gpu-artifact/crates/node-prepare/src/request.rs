//! What a prepare is asked to do: a claim and the devices allocated to it on
//! this node, already resolved to what each published name means.

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::OpaqueConfig;
use kubelet_plugin::ClaimRef;

/// One claim's devices of our driver on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrepareRequest {
    pub claim: ClaimRef,
    pub devices: Vec<AllocatedDevice>,
    /// A Pod the claim is reserved for carries `gpu.deckhouse.io/vfio: "true"`: every device of
    /// the claim goes to vfio-pci (a `VfioDeviceConfig` asks for it per device).
    pub vfio_requested: bool,
    /// The Pods the claim is reserved for (`status.reservedFor`), for the QEMU hook payload.
    pub pods: Vec<ReservedPod>,
}

/// A Pod a claim is reserved for; it lives in the claim's namespace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReservedPod {
    pub name: String,
    pub uid: String,
}

/// One allocation result of the claim, with the device its name stands for
/// (looked up in the node's `DeviceCatalog` by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatedDevice {
    /// The request of the claim this device was allocated for.
    pub request: String,
    pub pool: String,
    /// The published device name, e.g. `gpu0` or `gpu0-mig-2g12gb-0`.
    pub device: String,
    /// Set for a share of a device that allows multiple allocations.
    pub share_id: Option<String>,
    /// The share's `sharePercent` from the allocation's `consumedCapacity` (shares only).
    pub share_percent: Option<u32>,
    /// The share's `memory` from the allocation's `consumedCapacity`, in bytes; `None` when it
    /// asked for none (the shared offer's request policy consumes 0 by default).
    pub share_memory_bytes: Option<u64>,
    /// The opaque config that applies to this device's request (class configs, then claim configs;
    /// the later wins), already decoded strictly.
    pub config: Option<OpaqueConfig>,
    /// The DeviceClass of the request carries a `VfioDeviceConfig`: only then may the device go to
    /// vfio-pci (by that config, the claim's own one or the Pod annotation).
    pub vfio_allowed: bool,
    /// The allocation result's `adminAccess`: an admin reaches the device (monitoring,
    /// maintenance) without holding it, beside the claims that do. The node prepares such a
    /// device without the exclusivity checks, makes nothing on the card for it (no MIG
    /// instance, no mode or sharing change) and lets it block no other claim.
    pub admin_access: bool,
    pub target: OfferedDevice,
}

/// `namespace/name`, the way users name a claim in messages.
pub(crate) fn claim_label(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}
