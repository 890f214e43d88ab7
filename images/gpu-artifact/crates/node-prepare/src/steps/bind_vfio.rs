//! Step 7: hand each card the claim wants in a virtual machine to vfio-pci,
//! with every other function of its IOMMU group (e.g. its audio function),
//! and check that QEMU can open the group. The functions and their drivers
//! are recorded durably before the first one is unbound, so a crash at any
//! point is given back by the rollback of the `PrepareStarted` claim.

use host_inventory::HostRoot;

use super::{PrepareRun, PrepareStep};
use crate::error::PrepareError;
use crate::vfio_passthrough::{give_back, move_to_vfio, plan_passthrough};

pub(crate) struct BindVfio;

impl PrepareStep for BindVfio {
    fn name(&self) -> &'static str {
        "hand the card to vfio-pci"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        if let Err(error) = bind_all(run) {
            self.undo(run);
            return Err(error);
        }
        Ok(())
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        let root = HostRoot::new(&run.config.host_root);
        for record in run.vfio_moved.drain(..).rev() {
            if let Err(error) = give_back(&root, &record, run.config.vfio_bind_timeout) {
                tracing::warn!(group = record.iommu_group, %error, "cannot give a card of a failed prepare back to its driver; reconciliation will");
            }
        }
    }
}

fn bind_all(run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
    let label = run.claim_label();
    let root = HostRoot::new(&run.config.host_root);
    for (index, device) in run.request.devices.iter().enumerate() {
        if !run.plan(index).vfio {
            continue;
        }
        let card = device.target.pci_address();
        let vfio_error = |source| PrepareError::Vfio {
            claim: label.clone(),
            card: card.to_string(),
            source: Box::new(source),
        };
        let processes = run
            .backend
            .running_processes(card)
            .map_err(|source| PrepareError::Vendor {
                claim: label.clone(),
                device: device.device.clone(),
                source,
            })?;
        if !processes.is_empty() {
            let pids: Vec<String> = processes.iter().map(|p| p.pid.to_string()).collect();
            return Err(PrepareError::refused(
                &label,
                format!(
                    "device {}: card {card} runs processes (pids {}); it is handed to vfio-pci only when idle",
                    device.device,
                    pids.join(", ")
                ),
            ));
        }
        let record = plan_passthrough(&root, &card.to_string()).map_err(vfio_error)?;
        if let Some(claim) = run.checkpoint.claims.get_mut(&run.request.claim.uid)
            && let Some(recorded) = claim.devices.get_mut(index)
        {
            recorded.vfio = Some(record.clone());
        }
        run.store.save(&run.checkpoint)?;
        run.vfio_moved.push(record.clone());
        move_to_vfio(&root, &record, run.config.vfio_bind_timeout).map_err(vfio_error)?;
        tracing::info!(claim = %label, device = %device.device, %card, group = record.iommu_group, "handed the card to vfio-pci");
    }
    Ok(())
}
