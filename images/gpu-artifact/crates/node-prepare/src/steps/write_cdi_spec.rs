//! Step 9: write the claim's CDI spec (atomically), so the runtime can give
//! the containers exactly the allocated card, MIG device, MPS share or card
//! on vfio-pci (with the QEMU hook payload).

use dra_offers::OfferedDevice;

use super::{PrepareRun, PrepareStep};
use crate::atomic_file::{remove_durably, write_atomically};
use crate::cdi_spec::{self, CdiDevice, ContainerEdits};
use crate::driver_proc::{card_minor, mig_capability_minors};
use crate::error::PrepareError;
use crate::mps_memory_limit;

pub(crate) struct WriteCdiSpec;

impl PrepareStep for WriteCdiSpec {
    fn name(&self) -> &'static str {
        "write the CDI spec"
    }

    fn id(&self) -> &'static str {
        "write-cdi-spec"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        let uid = &run.request.claim.uid;
        let (devices, claim_edits) = cdi_devices(run)?;
        let spec = serde_json::to_vec_pretty(&cdi_spec::spec(uid, &devices, Some(&claim_edits)))
            .map_err(|e| PrepareError::refused(&run.claim_label(), format!("cannot encode the CDI spec: {e}")))?;
        write_atomically(&run.config.cdi_spec_path(uid), &spec)?;
        run.cdi_device_ids = run
            .request
            .devices
            .iter()
            .map(|device| vec![cdi_spec::cdi_device_id(uid, &device.device)])
            .collect();
        Ok(())
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        let path = run.config.cdi_spec_path(&run.request.claim.uid);
        if let Err(error) = remove_durably(&path) {
            tracing::warn!(%error, "cannot remove the CDI spec of a failed prepare");
        }
        run.cdi_device_ids.clear();
    }
}

/// One CDI device per allocated device, and the edits every container of the claim needs once:
/// `NVIDIA_VISIBLE_DEVICES` naming all its GPUs, `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` naming every MPS
/// share's memory, a VFIO claim's payload, a GPU claim's driver files.
fn cdi_devices(run: &PrepareRun<'_>) -> Result<(Vec<CdiDevice>, ContainerEdits), PrepareError> {
    let uid = &run.request.claim.uid;
    let recorded = run
        .checkpoint
        .claims
        .get(uid)
        .map(|claim| claim.devices.as_slice())
        .unwrap_or_default();
    let mut devices = Vec::new();
    let mut vfio_payload = None;
    let mut visible = Vec::new();
    let mut pinned_memory = Vec::new();
    for (index, device) in run.request.devices.iter().enumerate() {
        let plan = run.plan(index);
        let card = device.target.pci_address();
        if let Some(record) = recorded.get(index).and_then(|d| d.vfio.as_ref()) {
            let payload = run.config.vfio_payload_path(uid).display().to_string();
            vfio_payload = Some(ContainerEdits::vfio_claim(uid, &payload));
            devices.push(CdiDevice {
                device: device.device.clone(),
                edits: ContainerEdits::vfio(record.iommu_group),
            });
            continue;
        }
        let minor = card_minor(run.config, card)?;
        if device.admin_access {
            // The card itself, whatever the offer: a MIG offer has no instance made for an admin.
            let uuid = device.target.card_uuid();
            if !visible.iter().any(|seen| seen == uuid) {
                visible.push(uuid.to_owned());
            }
            devices.push(CdiDevice {
                device: device.device.clone(),
                edits: ContainerEdits::gpu(minor, None),
            });
            continue;
        }
        let edits = match &device.target {
            OfferedDevice::Physical { uuid, .. } => {
                visible.push(uuid.clone());
                ContainerEdits::gpu(minor, None)
            }
            OfferedDevice::SharedPhysical { uuid, .. } => {
                visible.push(uuid.clone());
                if let Some(mib) = plan.pinned_memory_mib {
                    pinned_memory.push((uuid.clone(), mib));
                }
                let edits = ContainerEdits::gpu(minor, None);
                match plan.active_thread_percentage {
                    Some(percentage) => {
                        let card = card.to_string();
                        let pipe = run.config.mps_pipe_dir(&card).display().to_string();
                        let shm = run.config.mps_launcher.as_ref().map(|_| run.config.mps_shm_dir(&card));
                        let shm = shm.map(|dir| dir.display().to_string());
                        edits.with_mps(&pipe, shm.as_deref(), percentage)
                    }
                    None => edits,
                }
            }
            OfferedDevice::Mig { .. } => {
                let (_, _, record) = run.created.iter().find(|(i, ..)| *i == index).ok_or_else(|| {
                    PrepareError::refused(
                        &run.claim_label(),
                        format!("device {}: no MIG device was created for it", device.device),
                    )
                })?;
                let minors =
                    mig_capability_minors(run.config, minor, record.gpu_instance_id, record.compute_instance_id)?;
                visible.push(record.uuid.clone());
                ContainerEdits::gpu(minor, Some(minors))
            }
        };
        devices.push(CdiDevice {
            device: device.device.clone(),
            edits,
        });
    }
    let mut claim_edits = ContainerEdits::visible_devices(&visible);
    claim_edits.env.extend(mps_memory_limit::env(&pinned_memory));
    if let Some(payload) = vfio_payload {
        claim_edits.merge(payload);
    }
    if let Some(driver) = run.config.driver.as_ref().filter(|_| !visible.is_empty()) {
        claim_edits.merge(driver.edits()?);
    }
    Ok((devices, claim_edits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::MigInstanceRecord;
    use crate::test_node::{Node, mig_request, physical_request};

    #[test]
    fn writes_one_cdi_device_per_allocated_device_and_undo_removes_the_file() {
        let node = Node::a30();
        let request = mig_request("uid-a", &[2]);
        let mut run = node.run(&request);
        let record = MigInstanceRecord {
            gpu_instance_id: 1,
            compute_instance_id: 0,
            uuid: "MIG-1".into(),
        };
        run.created.push((0, node.card(), record));
        WriteCdiSpec.run(&mut run).unwrap();
        assert_eq!(run.cdi_device_ids, [["gpu.deckhouse.io/claim=uid-a-gpu0-mig-2g12gb-2"]]);
        let path = node.config().cdi_spec_path("uid-a");
        let spec: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(spec["devices"][0]["name"], "uid-a-gpu0-mig-2g12gb-2");
        assert_eq!(spec["containerEdits"]["env"][0], "NVIDIA_VISIBLE_DEVICES=MIG-1");
        assert_eq!(
            spec["devices"][0]["containerEdits"]["deviceNodes"][5]["path"],
            "/dev/nvidia-caps/nvidia-cap13"
        );
        WriteCdiSpec.undo(&mut run);
        assert!(!path.exists());
    }

    #[test]
    fn a_card_the_driver_does_not_list_is_an_error_naming_the_file() {
        let node = Node::a30();
        node.host.remove("proc/driver/nvidia");
        let request = physical_request("uid-a");
        let mut run = node.run(&request);
        let error = WriteCdiSpec.run(&mut run).unwrap_err().to_string();
        assert!(
            error.contains("proc/driver/nvidia/gpus/0000:01:00.0/information"),
            "{error}"
        );
        assert!(!node.config().cdi_spec_path("uid-a").exists());
    }
}
