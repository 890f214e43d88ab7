//! The vendor-specific parts of a PhysicalGPU's status (capabilities and current state).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the card can do, from the vendor library. Present only while DriverReady is True.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    /// Product name, e.g. `NVIDIA A30`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    /// Total memory in MiB.
    #[serde(default, rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<i64>,
    /// Vendor of the card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<Vendor>,
    /// NVIDIA capabilities; present only for NVIDIA cards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia: Option<NvidiaCapabilities>,
}

/// GPU vendor.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Vendor {
    Nvidia,
    Amd,
    Intel,
}

/// NVIDIA capabilities from NVML.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaCapabilities {
    /// CUDA compute capability, e.g. `8.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_cap: Option<String>,
    /// Architecture, e.g. `Ampere`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_architecture: Option<String>,
    /// Board part number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board_part_number: Option<String>,
    /// Numeric formats the architecture supports, e.g. FP64, TF32, BF16.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_types: Option<Vec<String>>,
    /// Lowest settable power limit, in watts.
    #[serde(default, rename = "powerLimitMinW", skip_serializing_if = "Option::is_none")]
    pub power_limit_min_w: Option<i64>,
    /// Highest settable power limit, in watts.
    #[serde(default, rename = "powerLimitMaxW", skip_serializing_if = "Option::is_none")]
    pub power_limit_max_w: Option<i64>,
    /// Whether the card supports Multi-Instance GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_supported: Option<bool>,
    /// MIG geometry; absent when MIG is not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigCapabilities>,
}

/// MIG geometry of the card.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigCapabilities {
    /// Number of memory slices.
    pub total_slices: i64,
    /// Every GPU instance profile the card supports.
    pub profiles: Vec<MigProfile>,
}

/// One GPU instance profile.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigProfile {
    /// NVML profile id.
    #[serde(rename = "profileID")]
    pub profile_id: i64,
    /// Profile name, e.g. `1g.6gb`.
    pub name: String,
    /// Memory of an instance, in MiB.
    #[serde(rename = "memoryMiB")]
    pub memory_mib: i64,
    /// Memory slices an instance takes.
    pub slice_count: i64,
    /// How many instances of this profile fit on the card.
    pub max_instances: i64,
}

/// NVIDIA state from NVML.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NvidiaState {
    /// GPU UUID, e.g. `GPU-...`.
    #[serde(default, rename = "gpuUUID", skip_serializing_if = "Option::is_none")]
    pub gpu_uuid: Option<String>,
    /// NVIDIA driver version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_version: Option<String>,
    /// Highest CUDA version the driver supports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<String>,
    /// Power limit currently set, in watts.
    #[serde(default, rename = "powerLimitCurrentW", skip_serializing_if = "Option::is_none")]
    pub power_limit_current_w: Option<i64>,
    /// Power limit the card enforces, in watts.
    #[serde(default, rename = "powerLimitEnforcedW", skip_serializing_if = "Option::is_none")]
    pub power_limit_enforced_w: Option<i64>,
    /// MIG mode; present only when MIG is supported and the mode can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigState>,
}

/// Current MIG mode.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MigState {
    /// Enabled, Disabled, NotAvailable or Unknown.
    pub mode: MigMode,
}

/// MIG mode of a card.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MigMode {
    Enabled,
    Disabled,
    NotAvailable,
    #[default]
    Unknown,
}
