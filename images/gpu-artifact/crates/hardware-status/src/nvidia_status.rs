//! `status.capabilities` and `status.currentState.nvidia` from what NVML reports about a card, by
//! the spec's filling rules (seed 4.2.1-4.2.2): a field NVML does not report stays absent, power is
//! in watts, and a card without MIG has neither `capabilities.nvidia.mig` nor
//! `currentState.nvidia.mig`. Pure: no I/O.

use gpu_api::{Capabilities, MigCapabilities, MigMode, MigProfile, MigState, NvidiaCapabilities, NvidiaState, Vendor};
use gpu_vendor::GpuInventory;

use crate::compute_types::compute_types;

/// What the card can do.
pub fn capabilities(card: &GpuInventory) -> Capabilities {
    let power = card.power_limits;
    Capabilities {
        product_name: Some(card.product_name.clone()),
        memory_mib: Some(card.memory_mib as i64),
        vendor: Some(Vendor::Nvidia),
        nvidia: Some(NvidiaCapabilities {
            compute_cap: card.compute_capability.map(|cc| cc.to_string()),
            // nvml-wrapper names architectures it does not know "Unknown": that is no value.
            product_architecture: card.architecture.clone().filter(|a| a != "Unknown"),
            board_part_number: card.board_part_number.clone().filter(|p| !p.is_empty()),
            compute_types: card.compute_capability.and_then(compute_types),
            power_limit_min_w: power.map(|p| i64::from(p.min_w)),
            power_limit_max_w: power.map(|p| i64::from(p.max_w)),
            mig_supported: Some(card.mig.is_some()),
            mig: card.mig.as_ref().map(mig_capabilities),
        }),
    }
}

/// The card's current state.
pub fn nvidia_state(card: &GpuInventory) -> NvidiaState {
    let power = card.power_limits;
    NvidiaState {
        gpu_uuid: Some(card.uuid.clone()),
        driver_version: Some(card.driver_version.clone()),
        cuda_version: card.runtime_version.clone(),
        power_limit_current_w: power.and_then(|p| p.current_w).map(i64::from),
        power_limit_enforced_w: power.and_then(|p| p.enforced_w).map(i64::from),
        // The mode in force now; a pending change shows once the card has applied it.
        mig: card.mig.as_ref().map(|mig| MigState {
            mode: match mig.mode.current {
                gpu_vendor::MigState::Enabled => MigMode::Enabled,
                gpu_vendor::MigState::Disabled => MigMode::Disabled,
            },
        }),
    }
}

/// `totalSlices` counts GPU slices, the unit of every profile's `sliceCount` (the `G` of `4g.24gb`):
/// 4 on A30, 7 on A100/H100. That is the slice count of the full-card profile; the port's
/// `memory_slices` (8 on A100/H100) is the unit of placements, which the status does not show.
fn mig_capabilities(mig: &gpu_vendor::MigCapabilities) -> MigCapabilities {
    MigCapabilities {
        total_slices: mig.profiles.iter().map(|p| i64::from(p.slice_count)).max().unwrap_or(0),
        profiles: mig
            .profiles
            .iter()
            .map(|p| MigProfile {
                profile_id: i64::from(p.id),
                name: p.name.clone(),
                memory_mib: p.memory_mib as i64,
                slice_count: i64::from(p.slice_count),
                max_instances: i64::from(p.max_instances),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use gpu_vendor::{ComputeCapability, MigEngines, MigPlacement, PowerLimits};

    use super::*;

    fn a30(mig: bool) -> GpuInventory {
        GpuInventory {
            pci_address: "0000:01:00.0".parse().unwrap(),
            uuid: "GPU-a30".into(),
            product_name: "NVIDIA A30".into(),
            architecture: Some("Ampere".into()),
            board_part_number: Some("900-21001-0040-100".into()),
            memory_mib: 24576,
            compute_capability: Some(ComputeCapability { major: 8, minor: 0 }),
            driver_version: "580.76.05".into(),
            runtime_version: Some("13.0".into()),
            power_limits: Some(PowerLimits {
                min_w: 100,
                max_w: 165,
                current_w: Some(165),
                enforced_w: None,
            }),
            mig: mig.then(|| gpu_vendor::MigCapabilities {
                mode: gpu_vendor::MigMode {
                    current: gpu_vendor::MigState::Disabled,
                    pending: gpu_vendor::MigState::Enabled,
                },
                memory_slices: 4,
                profiles: vec![gpu_vendor::MigProfile {
                    id: 0,
                    name: "4g.24gb".into(),
                    memory_mib: 24064,
                    slice_count: 4,
                    max_instances: 1,
                    engines: MigEngines::default(),
                    placements: vec![MigPlacement { start: 0, size: 4 }],
                }],
            }),
            nvlink_remotes: Vec::new(),
        }
    }

    #[test]
    fn a_mig_card_gets_its_geometry_and_mode() {
        let card = a30(true);
        let caps = capabilities(&card);
        let nvidia = caps.nvidia.unwrap();
        assert_eq!(nvidia.compute_cap.as_deref(), Some("8.0"));
        assert_eq!(nvidia.mig_supported, Some(true));
        let mig = nvidia.mig.unwrap();
        assert_eq!(mig.total_slices, 4);
        assert_eq!(
            mig.profiles,
            [MigProfile {
                profile_id: 0,
                name: "4g.24gb".into(),
                memory_mib: 24064,
                slice_count: 4,
                max_instances: 1
            }]
        );
        let state = nvidia_state(&card);
        assert_eq!(
            state.mig,
            Some(MigState {
                mode: MigMode::Disabled
            }),
            "the current mode, not the pending one"
        );
        assert_eq!(state.power_limit_current_w, Some(165));
        assert_eq!(state.power_limit_enforced_w, None, "not reported, not invented");
    }

    #[test]
    fn a_card_without_mig_has_no_mig_blocks_and_unreported_fields_stay_absent() {
        let mut card = a30(false);
        card.architecture = Some("Unknown".into());
        card.power_limits = None;
        card.compute_capability = None;
        card.runtime_version = None;
        let nvidia = capabilities(&card).nvidia.unwrap();
        assert_eq!(nvidia.mig_supported, Some(false));
        assert!(nvidia.mig.is_none());
        assert!(nvidia.product_architecture.is_none());
        assert!(nvidia.compute_cap.is_none() && nvidia.compute_types.is_none());
        assert!(nvidia.power_limit_min_w.is_none() && nvidia.power_limit_max_w.is_none());
        let state = nvidia_state(&card);
        assert!(state.mig.is_none() && state.cuda_version.is_none() && state.power_limit_current_w.is_none());
        let json = serde_json::to_value(capabilities(&card)).unwrap();
        assert!(json["nvidia"].get("mig").is_none(), "{json}");
    }
}
