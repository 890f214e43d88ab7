//! MIG partitioning: profiles, placements, modes and created instances.

use serde::{Deserialize, Serialize};

/// Whether MIG is on. NVML reports a current and a pending value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MigState {
    Enabled,
    Disabled,
}

impl MigState {
    pub fn is_enabled(self) -> bool {
        self == MigState::Enabled
    }
}

/// The MIG mode of a card. `pending` is the mode after the next activation
/// (a GPU reset on Ampere); it differs from `current` while a change waits
/// for the card to become idle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigMode {
    pub current: MigState,
    pub pending: MigState,
}

impl MigMode {
    /// A change was requested but has not been applied yet.
    pub fn is_change_pending(&self) -> bool {
        self.current != self.pending
    }
}

/// What a MIG-capable card can be split into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigCapabilities {
    pub mode: MigMode,
    /// Number of memory slices of the card (8 on A100/H100, 4 on A30):
    /// placements are expressed in these.
    pub memory_slices: u32,
    pub profiles: Vec<MigProfile>,
}

/// A GPU instance profile (`nvidia-smi mig -lgip` row) with its placements.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigProfile {
    /// The vendor's profile id (NVML `profileInfo.id`, e.g. 19 for `1g.5gb`
    /// on A100): what creation calls take.
    pub id: u32,
    /// The profile name without vendor prefix, e.g. `1g.10gb+me`.
    pub name: String,
    pub memory_mib: u64,
    /// Compute slices (the `G` of `<G>g.<mem>gb`).
    pub slice_count: u32,
    pub max_instances: u32,
    pub engines: MigEngines,
    /// Where an instance of this profile may start, in memory slices.
    pub placements: Vec<MigPlacement>,
}

/// Engines a profile gets; the published counters consume these.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigEngines {
    pub multiprocessors: u32,
    pub copy_engines: u32,
    pub decoders: u32,
    pub encoders: u32,
    pub jpeg_engines: u32,
    pub ofa_engines: u32,
}

/// A contiguous range of memory slices `[start, start + size)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MigPlacement {
    pub start: u32,
    pub size: u32,
}

impl MigPlacement {
    pub fn end(&self) -> u32 {
        self.start + self.size
    }

    pub fn overlaps(&self, other: &MigPlacement) -> bool {
        self.start < other.end() && other.start < self.end()
    }
}

/// A created MIG partition: a GPU instance and, when it has one, the compute
/// instance that makes it a usable MIG device.
///
/// A GPU instance without compute instance (left behind by a crash between
/// the two creation steps) has `compute_instance_id` and `uuid` `None`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigInstance {
    pub gpu_instance_id: u32,
    pub compute_instance_id: Option<u32>,
    pub profile_id: u32,
    pub profile_name: String,
    pub placement: MigPlacement,
    /// The MIG device UUID (`MIG-…`) that containers are given.
    pub uuid: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_overlap_only_when_slices_are_shared() {
        let first_half = MigPlacement { start: 0, size: 4 };
        let second_half = MigPlacement { start: 4, size: 4 };
        let middle = MigPlacement { start: 2, size: 2 };
        assert!(!first_half.overlaps(&second_half));
        assert!(first_half.overlaps(&middle));
        assert!(middle.overlaps(&first_half));
        assert!(!second_half.overlaps(&middle));
    }

    #[test]
    fn pending_change_is_a_difference_between_current_and_pending() {
        let pending = MigMode {
            current: MigState::Disabled,
            pending: MigState::Enabled,
        };
        assert!(pending.is_change_pending());
        let settled = MigMode {
            current: MigState::Enabled,
            pending: MigState::Enabled,
        };
        assert!(!settled.is_change_pending());
    }
}
