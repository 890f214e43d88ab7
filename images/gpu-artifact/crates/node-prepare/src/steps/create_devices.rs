//! Step 5: make the devices real. A whole card needs MIG off; a MIG device
//! needs MIG on (switched only on a free, idle card) and a GPU instance at
//! the allocated placement with its compute instance.

use dra_offers::OfferedDevice;

use super::{PrepareRun, PrepareStep};
use crate::card_mode::{disable_for_physical, disable_if_unused, enable_for_mig};
use crate::checkpoint::MigInstanceRecord;
use crate::error::PrepareError;
use crate::fault_point::fault_point;

pub(crate) struct CreateDevices;

impl PrepareStep for CreateDevices {
    fn name(&self) -> &'static str {
        "create the devices"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        if let Err(error) = create_all(run) {
            // Devices made before the failure are this step's to take back.
            self.undo(run);
            return Err(error);
        }
        fault_point("after-devices-created");
        Ok(())
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        for (_, card, record) in run.created.drain(..).rev() {
            if let Err(error) = run.backend.destroy_mig_device(&card, record.gpu_instance_id) {
                tracing::warn!(%card, gpu_instance = record.gpu_instance_id, %error, "cannot destroy a MIG device of a failed prepare; reconciliation will");
            }
        }
        let own_uid = run.request.claim.uid.as_str();
        for card in run.mig_enabled_on.drain(..) {
            if let Err(error) = disable_if_unused(run.backend, &card, &run.checkpoint, Some(own_uid)) {
                tracing::warn!(%card, %error, "cannot turn MIG mode back off after a failed prepare");
            }
        }
    }
}

fn create_all(run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
    let label = run.claim_label();
    let own_uid = run.request.claim.uid.as_str();
    for (index, device) in run.request.devices.iter().enumerate() {
        let name = device.device.as_str();
        match &device.target {
            OfferedDevice::Physical { pci_address, .. } | OfferedDevice::SharedPhysical { pci_address, .. } => {
                disable_for_physical(run.backend, pci_address, &label, name)?
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
                if enable_for_mig(run.backend, pci_address, &label, name, card_has_other_allocation)? {
                    run.mig_enabled_on.push(*pci_address);
                }
                let vendor = |source| PrepareError::Vendor {
                    claim: label.clone(),
                    device: name.to_owned(),
                    source,
                };
                let instance = run
                    .backend
                    .create_mig_device(pci_address, *profile_id, *placement)
                    .map_err(vendor)?;
                let (Some(compute_instance_id), Some(uuid)) = (instance.compute_instance_id, instance.uuid) else {
                    let _ = run.backend.destroy_mig_device(pci_address, instance.gpu_instance_id);
                    return Err(PrepareError::refused(
                        &label,
                        format!("device {name}: the MIG device on card {pci_address} has no compute instance or UUID"),
                    ));
                };
                tracing::info!(claim = %label, device = name, card = %pci_address, gpu_instance = instance.gpu_instance_id, %uuid, "created MIG device");
                let record = MigInstanceRecord {
                    gpu_instance_id: instance.gpu_instance_id,
                    compute_instance_id,
                    uuid,
                };
                run.created.push((index, *pci_address, record));
            }
        }
    }
    Ok(())
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
        assert_eq!(run.mig_enabled_on, [node.card()]);

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
        };
        node.mock
            .state()
            .add_process(&node.card().to_string(), process)
            .unwrap();
        let request = mig_request("uid-a", &[0]);
        let mut run = node.run(&request);
        let error = CreateDevices.run(&mut run).unwrap_err().to_string();
        assert!(error.contains("runs processes (pids 4242)"), "{error}");
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
