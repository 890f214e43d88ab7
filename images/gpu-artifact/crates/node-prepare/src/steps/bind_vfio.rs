//! Step 7: hand each card the claim wants in a virtual machine to vfio-pci,
//! with its own other functions (e.g. its audio function), and check that
//! QEMU can open the group; a group holding a device that is not the card's
//! is refused, naming the devices. The functions and their drivers
//! are recorded durably before the first one is unbound, so a crash at any
//! point is given back by the rollback of the `PrepareStarted` claim.

use host_inventory::HostRoot;
use host_inventory::vfio;

use super::{PrepareRun, PrepareStep};
use crate::error::PrepareError;
use crate::fault_point::fault_point;
use crate::vfio_passthrough::{PassthroughPlan, give_back, plan_passthrough};

pub(crate) struct BindVfio;

impl PrepareStep for BindVfio {
    fn name(&self) -> &'static str {
        "hand the card to vfio-pci"
    }

    fn id(&self) -> &'static str {
        "bind-vfio"
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
        let record = match plan_passthrough(&root, &card.to_string()).map_err(vfio_error)? {
            PassthroughPlan::Ready(record) => record,
            PassthroughPlan::Refused { iommu_group, foreign } => {
                return Err(PrepareError::refused(
                    &label,
                    format!(
                        "device {}: card {card} shares IOMMU group {iommu_group} with devices that are not its own: \
                         {foreign}; passthrough would take them from the host. Put the card in a slot with an \
                         IOMMU group of its own (or enable ACS on the ports above it)",
                        device.device
                    ),
                ));
            }
        };
        if let Some(claim) = run.checkpoint.claims.get_mut(&run.request.claim.uid)
            && let Some(recorded) = claim.devices.get_mut(index)
        {
            recorded.vfio = Some(record.clone());
        }
        run.store.save(&run.checkpoint)?;
        run.vfio_moved.push(record.clone());
        for function in &record.functions {
            vfio::bind_to_vfio(&root, &function.address, run.config.vfio_bind_timeout).map_err(vfio_error)?;
            fault_point("prepare/inside/bind-vfio/function-moved")?;
        }
        vfio::check_group_viable(&root, record.iommu_group).map_err(vfio_error)?;
        tracing::info!(claim = %label, device = %device.device, %card, group = record.iommu_group, "handed the card to vfio-pci");
    }
    Ok(())
}
