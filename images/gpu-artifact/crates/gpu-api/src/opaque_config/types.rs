//! The config kinds as data. Field names and values follow ARCHITECTURE.md section 3.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a whole card (or a MIG device) is shared between the claims it is allocated to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default, JsonSchema)]
pub enum SharingStrategy {
    /// One claim at a time.
    #[default]
    Exclusive,
    /// Time slices of the whole card, the length set per card.
    TimeSlicing,
    /// CUDA Multi-Process Service: one control daemon per card, a thread percentage per client.
    #[serde(rename = "MPS")]
    Mps,
}

impl SharingStrategy {
    /// The name as users write it (`Exclusive`, `TimeSlicing`, `MPS`).
    pub fn as_str(self) -> &'static str {
        match self {
            SharingStrategy::Exclusive => "Exclusive",
            SharingStrategy::TimeSlicing => "TimeSlicing",
            SharingStrategy::Mps => "MPS",
        }
    }
}

/// The time-slice length (`nvidia-smi compute-policy --set-timeslice` 0..3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default, JsonSchema)]
pub enum TimeSliceInterval {
    /// The driver's default (`--set-timeslice 0`).
    #[default]
    Default,
    /// `--set-timeslice 1`.
    Short,
    /// `--set-timeslice 2`.
    Medium,
    /// `--set-timeslice 3`.
    Long,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeSlicingConfig {
    #[serde(default)]
    pub interval: TimeSliceInterval,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MpsConfig {
    /// 1..100; the share's own `sharePercent` is what each container gets when this is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_active_thread_percentage: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuSharing {
    #[serde(default)]
    pub strategy: SharingStrategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_slicing: Option<TimeSlicingConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps: Option<MpsConfig>,
}

/// `kind: GpuConfig`: a whole card.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<GpuSharing>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigSharing {
    #[serde(default)]
    pub strategy: SharingStrategy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps: Option<MpsConfig>,
}

/// `kind: MigDeviceConfig`: a MIG device (no time slicing: it has no effect on MIG).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigDeviceConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<MigSharing>,
}

/// `kind: VfioDeviceConfig`: hand the whole card to a virtual machine through vfio-pci. The exact
/// object the virtualization module sends is `{"apiVersion": "resource.gpu.deckhouse.io/v1alpha1",
/// "kind": "VfioDeviceConfig"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VfioDeviceConfig {}

/// One decoded opaque config.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum OpaqueConfig {
    GpuConfig(GpuConfig),
    MigDeviceConfig(MigDeviceConfig),
    VfioDeviceConfig(VfioDeviceConfig),
}
