//! The checks before anything is touched: the devices are this node's, no
//! exclusive device is prepared twice, and the safety invariants of
//! architecture section 8 hold against every recorded claim: MIG only with
//! MIG, an exclusive card alone, the shares of a card with one strategy and
//! its parameters, VFIO only for an exclusive whole card on bare metal.
//! Defence in depth: the scheduler's counters should already have made most
//! of these impossible, but the 1.34/1.35 scheduler can miss committed shared
//! allocations. Pure: a function of the request, the checkpoint and the
//! bare-metal verdict.

mod shares;

use dra_offers::OfferedDevice;
use host_inventory::BareMetalVerdict;

use crate::cdi_spec;
use crate::checkpoint::CheckpointData;
use crate::device_plan::{DevicePlan, plan_devices};
use crate::request::{AllocatedDevice, PrepareRequest, claim_label};
use shares::check_shares;

/// The plan of every device, or why the request must be refused, as a
/// sentence about its devices. `bare_metal` is asked only when a device
/// goes to vfio-pci.
pub(crate) fn check(
    request: &PrepareRequest,
    checkpoint: &CheckpointData,
    pool: &str,
    bare_metal: impl FnOnce() -> BareMetalVerdict,
) -> Result<Vec<DevicePlan>, String> {
    if let Some(reason) = refusal(request, checkpoint, pool) {
        return Err(reason);
    }
    let plans = plan_devices(request)?;
    check_shares(request, &plans, checkpoint)?;
    let first_vfio = request.devices.iter().zip(&plans).find(|(_, plan)| plan.vfio);
    if let Some((device, _)) = first_vfio {
        let verdict = bare_metal();
        if !verdict.bare_metal {
            return Err(format!(
                "device {}: VFIO passthrough needs a bare-metal node, and this node is not one: {}",
                device.device, verdict.reason
            ));
        }
    }
    Ok(plans)
}

/// Why the request must be refused for where its devices are (pool, CDI name, other allocations on their cards).
fn refusal(request: &PrepareRequest, checkpoint: &CheckpointData, pool: &str) -> Option<String> {
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
        // Admin access holds nothing: it neither conflicts nor is conflicted with (the allocator
        // already keeps a device to one pick of a claim).
        if device.admin_access {
            continue;
        }
        for other in request.devices.iter().take(index).filter(|other| !other.admin_access) {
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
                share_percent: None,
                share_memory_bytes: None,
                config: None,
                vfio_allowed: false,
                admin_access: recorded.admin_access,
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
    matches!(device.target, OfferedDevice::SharedPhysical { .. })
}

/// Why two allocations on one card cannot coexist (`None`: they can, or they
/// are on different cards). Sharing parameters are `check_shares`' business.
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
        (OfferedDevice::Mig { .. }, _) | (_, OfferedDevice::Mig { .. }) => Some(format!(
            "would put a whole-card and a MIG allocation on card {card}; a card with a MIG allocation carries only MIG allocations"
        )),
        (OfferedDevice::SharedPhysical { .. }, OfferedDevice::SharedPhysical { .. }) => None,
        (OfferedDevice::SharedPhysical { .. }, OfferedDevice::Physical { .. }) => Some(format!(
            "would share card {card}, which an exclusive allocation holds alone"
        )),
        (OfferedDevice::Physical { .. }, OfferedDevice::SharedPhysical { .. }) => {
            Some(format!("would take card {card} exclusively, but the card is shared"))
        }
        (OfferedDevice::Physical { .. }, OfferedDevice::Physical { .. }) => Some(format!(
            "would share card {card}, which an exclusive allocation holds alone"
        )),
    }
}

#[cfg(test)]
mod tests;
