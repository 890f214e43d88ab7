//! Step 5: make the devices real. A whole card needs MIG off; a MIG device
//! needs MIG on (switched only on a free, idle card) and a GPU instance at
//! the allocated placement with its compute instance.

use dra_offers::OfferedDevice;
use gpu_vendor::{MigPlacement, PciAddress};

use super::{PrepareRun, PrepareStep};
use crate::bounded_vendor::was_abandoned;
use crate::card_mode::{ModeChange, restore_if_unneeded};
use crate::checkpoint::MigInstanceRecord;
use crate::error::PrepareError;
use crate::fault_point::fault_point;

pub(crate) struct CreateDevices;

impl PrepareStep for CreateDevices {
    fn name(&self) -> &'static str {
        "create the devices"
    }

    fn id(&self) -> &'static str {
        "create-devices"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        if let Err(error) = create_all(run) {
            // Devices made before the failure are this step's to take back.
            self.undo(run);
            return Err(error);
        }
        Ok(())
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        for (_, card, record) in run.created.drain(..).rev() {
            if let Err(error) = run.backend.destroy_mig_device(&card, record.gpu_instance_id) {
                tracing::warn!(%card, gpu_instance = record.gpu_instance_id, %error, "cannot destroy a MIG device of a failed prepare; reconciliation will");
            }
        }
        let own_uid = run.request.claim.uid.clone();
        let cards: Vec<PciAddress> = run.mode_changed_on.drain(..).collect();
        // A create given up on may still land on its card: the claim's rollback restores the mode.
        let abandoned = run.mig_creates_abandoned.clone();
        for card in cards.into_iter().filter(|card| !abandoned.contains(card)) {
            if let Err(error) = restore_if_unneeded(run.backend, run.store, &mut run.checkpoint, &card, Some(&own_uid))
            {
                tracing::warn!(%card, %error, "cannot give the card its MIG mode back after a failed prepare; reconciliation will");
            }
        }
    }
}

fn create_all(run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
    let label = run.claim_label();
    let request = run.request;
    let own_uid = request.claim.uid.as_str();
    // Admin access makes nothing: it reaches the card as its holders left it.
    let held = request
        .devices
        .iter()
        .enumerate()
        .filter(|(_, device)| !device.admin_access);
    for (index, device) in held {
        let name = device.device.as_str();
        match &device.target {
            OfferedDevice::Physical { pci_address, .. } | OfferedDevice::SharedPhysical { pci_address, .. } => {
                let mut change = ModeChange {
                    backend: run.backend,
                    store: run.store,
                    checkpoint: &mut run.checkpoint,
                    card: pci_address,
                    claim: &label,
                    device: name,
                };
                if change.disable_for_whole_card()? {
                    run.mode_changed_on.push(*pci_address);
                }
            }
            OfferedDevice::Mig {
                pci_address,
                profile_id,
                placement,
                ..
            } => {
                let card_has_other_allocation = run
                    .checkpoint
                    .devices_on_card(pci_address)
                    .any(|(uid, ..)| uid != own_uid)
                    || run.created.iter().any(|(_, card, _)| card == pci_address);
                let mut change = ModeChange {
                    backend: run.backend,
                    store: run.store,
                    checkpoint: &mut run.checkpoint,
                    card: pci_address,
                    claim: &label,
                    device: name,
                };
                if change.enable_for_mig(card_has_other_allocation)? {
                    run.mode_changed_on.push(*pci_address);
                }
                let record = create_mig_device(run, index, pci_address, *profile_id, *placement)?;
                run.created.push((index, *pci_address, record));
            }
        }
    }
    Ok(())
}

/// Creates one MIG device after checking, under the node lock, that its placement is free and
/// recording that its creation is attempted (the rule that lets a rollback find it unrecorded).
fn create_mig_device(
    run: &mut PrepareRun<'_>,
    index: usize,
    card: &PciAddress,
    profile_id: u32,
    placement: MigPlacement,
) -> Result<MigInstanceRecord, PrepareError> {
    let label = run.claim_label();
    let name = run
        .request
        .devices
        .get(index)
        .map(|d| d.device.clone())
        .unwrap_or_default();
    let vendor = |source| PrepareError::Vendor {
        claim: label.clone(),
        device: name.clone(),
        source,
    };
    let occupying: Vec<String> = run
        .backend
        .mig_instances(card)
        .map_err(vendor)?
        .into_iter()
        .filter(|instance| instance.placement.overlaps(&placement))
        .filter(|instance| {
            !run.created
                .iter()
                .any(|(_, made_on, made)| made_on == card && made.gpu_instance_id == instance.gpu_instance_id)
        })
        .map(|instance| {
            format!(
                "{} (GPU instance {}, memory slices {}..{})",
                instance.profile_name,
                instance.gpu_instance_id,
                instance.placement.start,
                instance.placement.end()
            )
        })
        .collect();
    if !occupying.is_empty() {
        return Err(PrepareError::refused(
            &label,
            format!(
                "device {name}: card {card} already has MIG instances on memory slices {}..{} that no prepared claim \
                 records: {}; the node never destroys instances it did not make (an admin's, or a Pod's whose \
                 checkpoint was lost): remove them with nvidia-smi once nothing uses them",
                placement.start,
                placement.end(),
                occupying.join(", ")
            ),
        ));
    }
    if let Some(recorded) = run
        .checkpoint
        .claims
        .get_mut(&run.request.claim.uid)
        .and_then(|claim| claim.devices.get_mut(index))
    {
        recorded.mig_create_attempted = true;
    }
    run.store.save(&run.checkpoint)?;
    fault_point("prepare/inside/create-devices/mig-create-recorded")?;
    let instance = run
        .backend
        .create_mig_device(card, profile_id, placement)
        .map_err(|source| {
            if was_abandoned(&source) {
                run.mig_creates_abandoned.push(*card);
            }
            vendor(source)
        })?;
    fault_point("prepare/inside/create-devices/mig-device-made")?;
    let (Some(compute_instance_id), Some(uuid)) = (instance.compute_instance_id, instance.uuid) else {
        let _ = run.backend.destroy_mig_device(card, instance.gpu_instance_id);
        return Err(PrepareError::refused(
            &label,
            format!("device {name}: the MIG device on card {card} has no compute instance or UUID"),
        ));
    };
    tracing::info!(claim = %label, device = %name, %card, gpu_instance = instance.gpu_instance_id, %uuid, "created MIG device");
    Ok(MigInstanceRecord {
        gpu_instance_id: instance.gpu_instance_id,
        compute_instance_id,
        uuid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_node::{Node, mig_request};
    use mock_nvml::state::ProcessState;

    #[test]
    fn creates_instances_at_the_allocated_placements_and_undo_removes_them() {
        let node = Node::a30();
        let request = mig_request("uid-a", &[0, 2]);
        let mut run = node.run(&request);
        CreateDevices.run(&mut run).unwrap();
        let gpu = node.mock_gpu();
        assert!(gpu.mig_current);
        let starts: Vec<u32> = gpu.gpu_instances.iter().map(|gi| gi.placement.start).collect();
        assert_eq!(starts, [0, 2]);
        assert_eq!(run.created.len(), 2);
        assert_eq!(run.mode_changed_on, [node.card()]);

        CreateDevices.undo(&mut run);
        let gpu = node.mock_gpu();
        assert!(gpu.gpu_instances.is_empty());
        assert!(!gpu.mig_current && !gpu.mig_pending);
    }

    #[test]
    fn a_busy_card_is_not_switched_to_mig() {
        let node = Node::a30();
        let process = ProcessState {
            pid: 4242,
            used_gpu_memory_bytes: 1 << 30,
            gpu_instance_id: None,
            compute_instance_id: None,
            name: None,
        };
        node.mock
            .state()
            .add_process(&node.card().to_string(), process)
            .unwrap();
        let request = mig_request("uid-a", &[0]);
        let mut run = node.run(&request);
        let error = CreateDevices.run(&mut run).unwrap_err().to_string();
        assert!(error.contains("runs processes (NVML lists pid 4242)"), "{error}");
        let gpu = node.mock_gpu();
        assert!(!gpu.mig_current && !gpu.mig_pending);
    }

    #[test]
    fn a_failure_on_the_second_device_takes_back_the_first() {
        let node = Node::a30();
        // Placement 1 is not a 2g.12gb placement: the second creation fails.
        let mut request = mig_request("uid-a", &[0, 2]);
        if let OfferedDevice::Mig { placement, .. } = &mut request.devices[1].target {
            placement.start = 1;
        }
        let mut run = node.run(&request);
        let error = CreateDevices.run(&mut run).unwrap_err();
        assert!(matches!(error, PrepareError::Vendor { .. }), "{error}");
        let gpu = node.mock_gpu();
        assert!(gpu.gpu_instances.is_empty());
        assert!(!gpu.mig_current);
    }
}
