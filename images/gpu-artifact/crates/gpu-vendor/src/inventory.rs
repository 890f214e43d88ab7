//! What a card is: identity, versions, memory, power and MIG capabilities.
//! These feed `PhysicalGPU.status.capabilities` and `status.currentState`.

use serde::{Deserialize, Serialize};

use crate::mig::MigCapabilities;
use crate::pci_address::PciAddress;

/// A snapshot of one card as its vendor library reports it.
///
/// Optional fields are `None` when the library does not report them (an
/// unsupported query), so the status can leave them out instead of
/// inventing a value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuInventory {
    pub pci_address: PciAddress,
    /// The vendor's stable card identity (`GPU-…` for NVIDIA).
    pub uuid: String,
    pub product_name: String,
    /// The product architecture as the vendor names it (`Ampere`, `Hopper`).
    pub architecture: Option<String>,
    pub board_part_number: Option<String>,
    /// Total device memory in MiB.
    pub memory_mib: u64,
    pub compute_capability: Option<ComputeCapability>,
    /// The kernel driver version (`580.76.05`).
    pub driver_version: String,
    /// The compute runtime the driver supports (CUDA `13.0` for NVIDIA).
    pub runtime_version: Option<String>,
    pub power_limits: Option<PowerLimits>,
    /// `None` when the card cannot be partitioned at all.
    pub mig: Option<MigCapabilities>,
    /// Where the card's active NVLinks lead (other cards, NVSwitches), by PCI address, each once;
    /// empty for a card without NVLink or without an active link.
    #[serde(default)]
    pub nvlink_remotes: Vec<PciAddress>,
}

/// A compute capability such as `8.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeCapability {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Power limits in whole watts (vendor libraries report milliwatts; the
/// status shows watts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PowerLimits {
    pub min_w: u32,
    pub max_w: u32,
    /// The limit set by the administrator, when reported.
    pub current_w: Option<u32>,
    /// The limit the card actually enforces, when reported.
    pub enforced_w: Option<u32>,
}

impl PowerLimits {
    /// Milliwatts to whole watts, rounding to the nearest watt.
    pub fn milliwatts_to_watts(milliwatts: u32) -> u32 {
        milliwatts.saturating_add(500) / 1000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliwatts_round_to_the_nearest_watt() {
        assert_eq!(PowerLimits::milliwatts_to_watts(165_000), 165);
        assert_eq!(PowerLimits::milliwatts_to_watts(99_499), 99);
        assert_eq!(PowerLimits::milliwatts_to_watts(99_500), 100);
        assert_eq!(PowerLimits::milliwatts_to_watts(0), 0);
    }

    #[test]
    fn compute_capability_reads_as_major_dot_minor() {
        let cc = ComputeCapability { major: 9, minor: 0 };
        assert_eq!(cc.to_string(), "9.0");
    }
}
