//! The checks before anything is touched: the devices are this node's, no
//! exclusive device is prepared twice, and the safety invariants of
//! architecture section 8 hold against every recorded claim (defence in
//! depth: the scheduler's counters should already have made these
//! impossible). Pure: a function of the request and the checkpoint.

use dra_offers::OfferedDevice;

use crate::cdi_spec;
use crate::checkpoint::CheckpointData;
use crate::request::{AllocatedDevice, PrepareRequest, claim_label};

/// Why the request must be refused, as a sentence about its devices.
pub(crate) fn refusal(request: &PrepareRequest, checkpoint: &CheckpointData, pool: &str) -> Option<String> {
    for (index, device) in request.devices.iter().enumerate() {
        if device.pool != pool {
            return Some(format!(
                "device {} is from pool {}, not this node's pool {pool}",
                device.device, device.pool
            ));
        }
        if let Err(reason) = cdi_spec::check_name(&request.claim.uid, &device.device) {
            return Some(format!("device {}: {reason}", device.device));
        }
        for other in &request.devices[..index] {
            if let Some(conflict) = conflict(device, other) {
                return Some(format!(
                    "device {} and device {} of the same claim {conflict}",
                    device.device, other.device
                ));
            }
        }
        for (uid, claim, recorded) in checkpoint.devices_on_card(device.target.pci_address()) {
            if uid == request.claim.uid {
                continue;
            }
            let recorded = AllocatedDevice {
                request: recorded.request.clone(),
                pool: recorded.pool.clone(),
                device: recorded.device.clone(),
                share_id: recorded.share_id.clone(),
                target: recorded.target.clone(),
            };
            if recorded.device == device.device && !(is_shared(device) && is_shared(&recorded)) {
                return Some(format!(
                    "device {} is prepared for claim {}",
                    device.device,
                    claim_label(&claim.namespace, &claim.name)
                ));
            }
            if let Some(conflict) = conflict(device, &recorded) {
                return Some(format!(
                    "device {} {conflict} (device {} of claim {})",
                    device.device,
                    recorded.device,
                    claim_label(&claim.namespace, &claim.name)
                ));
            }
        }
    }
    None
}

fn is_shared(device: &AllocatedDevice) -> bool {
    device.share_id.is_some()
}

/// Why two allocations on one card cannot coexist (`None`: they can, or they
/// are on different cards).
fn conflict(a: &AllocatedDevice, b: &AllocatedDevice) -> Option<String> {
    if a.target.pci_address() != b.target.pci_address() {
        return None;
    }
    let card = a.target.pci_address();
    match (&a.target, &b.target) {
        (OfferedDevice::Mig { placement: pa, .. }, OfferedDevice::Mig { placement: pb, .. }) => {
            pa.overlaps(pb).then(|| {
                format!(
                    "overlap on card {card}: memory slices {}..{} and {}..{}",
                    pa.start,
                    pa.end(),
                    pb.start,
                    pb.end()
                )
            })
        }
        (OfferedDevice::Physical { .. }, OfferedDevice::Physical { .. }) => {
            let same_share = a.device == b.device && is_shared(a) && is_shared(b);
            (!same_share).then(|| format!("would share card {card}, which an exclusive allocation holds alone"))
        }
        _ => Some(format!(
            "would put a whole-card and a MIG allocation on card {card}; a card with a MIG allocation carries only MIG allocations"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{CheckpointClaim, CheckpointDevice, ClaimState};
    use gpu_vendor::MigPlacement;
    use kubelet_plugin::ClaimRef;

    const POOL: &str = "gpus/w1";

    fn physical(name: &str, share_id: Option<&str>) -> AllocatedDevice {
        AllocatedDevice {
            request: "gpu".into(),
            pool: POOL.into(),
            device: name.into(),
            share_id: share_id.map(str::to_owned),
            target: OfferedDevice::Physical {
                pci_address: "0000:01:00.0".parse().unwrap(),
                uuid: "GPU-1".into(),
                physical_gpu: "w1-a30-0".into(),
            },
        }
    }

    fn mig(start: u32) -> AllocatedDevice {
        AllocatedDevice {
            request: "mig".into(),
            pool: POOL.into(),
            device: format!("gpu0-mig-2g12gb-{start}"),
            share_id: None,
            target: OfferedDevice::Mig {
                pci_address: "0000:01:00.0".parse().unwrap(),
                parent_uuid: "GPU-1".into(),
                physical_gpu: "w1-a30-0".into(),
                profile_id: 5,
                profile_name: "2g.12gb".into(),
                placement: MigPlacement { start, size: 2 },
            },
        }
    }

    fn request(devices: Vec<AllocatedDevice>) -> PrepareRequest {
        PrepareRequest {
            claim: ClaimRef {
                namespace: "default".into(),
                name: "train".into(),
                uid: "uid-train".into(),
            },
            devices,
        }
    }

    fn recorded(devices: Vec<AllocatedDevice>) -> CheckpointData {
        let mut data = CheckpointData::default();
        let devices = devices
            .into_iter()
            .map(|d| CheckpointDevice {
                request: d.request,
                pool: d.pool,
                device: d.device,
                share_id: d.share_id,
                target: d.target,
                cdi_device_ids: Vec::new(),
                mig_instance: None,
            })
            .collect();
        let claim = CheckpointClaim {
            namespace: "ns".into(),
            name: "other".into(),
            state: ClaimState::PrepareCompleted,
            devices,
        };
        data.claims.insert("uid-other".into(), claim);
        data
    }

    #[test]
    fn a_device_of_another_pool_is_refused() {
        let mut device = physical("gpu0", None);
        device.pool = "gpus/w2".into();
        let reason = refusal(&request(vec![device]), &CheckpointData::default(), POOL).unwrap();
        assert_eq!(reason, "device gpu0 is from pool gpus/w2, not this node's pool gpus/w1");
    }

    #[test]
    fn an_exclusive_device_of_another_claim_is_refused_by_name() {
        let checkpoint = recorded(vec![physical("gpu0", None)]);
        let reason = refusal(&request(vec![physical("gpu0", None)]), &checkpoint, POOL).unwrap();
        assert_eq!(reason, "device gpu0 is prepared for claim ns/other");
        let checkpoint = recorded(vec![mig(0)]);
        let reason = refusal(&request(vec![mig(0)]), &checkpoint, POOL).unwrap();
        assert_eq!(reason, "device gpu0-mig-2g12gb-0 is prepared for claim ns/other");
    }

    #[test]
    fn shares_of_one_device_coexist_but_not_with_an_exclusive_allocation() {
        let shared = recorded(vec![physical("gpu0", Some("s1"))]);
        assert_eq!(
            refusal(&request(vec![physical("gpu0", Some("s2"))]), &shared, POOL),
            None
        );
        assert!(refusal(&request(vec![physical("gpu0", None)]), &shared, POOL).is_some());
    }

    #[test]
    fn whole_card_and_mig_allocations_never_share_a_card() {
        let reason = refusal(&request(vec![physical("gpu0", None)]), &recorded(vec![mig(2)]), POOL).unwrap();
        assert!(reason.contains("carries only MIG allocations"), "{reason}");
        assert!(
            reason.contains("device gpu0-mig-2g12gb-2 of claim ns/other"),
            "{reason}"
        );
        let reason = refusal(&request(vec![mig(0)]), &recorded(vec![physical("gpu0", None)]), POOL).unwrap();
        assert!(reason.contains("carries only MIG allocations"), "{reason}");
        let reason = refusal(
            &request(vec![physical("gpu0", None), mig(0)]),
            &CheckpointData::default(),
            POOL,
        );
        assert!(reason.unwrap().contains("of the same claim"));
    }

    #[test]
    fn overlapping_placements_are_refused_and_disjoint_ones_accepted() {
        let checkpoint = recorded(vec![mig(0)]);
        assert_eq!(refusal(&request(vec![mig(2)]), &checkpoint, POOL), None);
        let mut overlapping = mig(1);
        overlapping.device = "gpu0-mig-2g12gb-1".into();
        let reason = refusal(&request(vec![overlapping]), &checkpoint, POOL).unwrap();
        assert!(reason.contains("memory slices 1..3 and 0..2"), "{reason}");
    }

    #[test]
    fn the_claims_own_record_is_not_a_conflict() {
        let mut checkpoint = recorded(vec![mig(0)]);
        let own = checkpoint.claims.remove("uid-other").unwrap();
        checkpoint.claims.insert("uid-train".into(), own);
        assert_eq!(refusal(&request(vec![mig(0)]), &checkpoint, POOL), None);
    }
}
