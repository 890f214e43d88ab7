//! Step 8: write the claim's QEMU hook payload (see the crate docs), which
//! the CDI spec mounts into the containers, when a card went to vfio-pci.

use host_inventory::HostRoot;

use super::{PrepareRun, PrepareStep};
use crate::atomic_file::{remove_durably, write_atomically};
use crate::error::PrepareError;
use crate::vfio_passthrough::hook_payload;

pub(crate) struct WriteVfioPayload;

impl PrepareStep for WriteVfioPayload {
    fn name(&self) -> &'static str {
        "write the QEMU hook payload"
    }

    fn id(&self) -> &'static str {
        "write-vfio-payload"
    }

    fn run(&self, run: &mut PrepareRun<'_>) -> Result<(), PrepareError> {
        let Some(claim) = run.checkpoint.claims.get(&run.request.claim.uid) else {
            return Ok(());
        };
        let devices: Vec<_> = run
            .request
            .devices
            .iter()
            .zip(&claim.devices)
            .filter_map(|(device, recorded)| recorded.vfio.as_ref().map(|record| (device, record)))
            .collect();
        let Some((first, _)) = devices.first() else {
            return Ok(());
        };
        let card = first.target.pci_address().to_string();
        let root = HostRoot::new(&run.config.host_root);
        let label = run.claim_label();
        let payload = hook_payload(&root, run.request, &devices).map_err(|source| PrepareError::Vfio {
            claim: label.clone(),
            card,
            source: Box::new(source),
        })?;
        let text = serde_json::to_vec_pretty(&payload)
            .map_err(|e| PrepareError::refused(&label, format!("cannot encode the QEMU hook payload: {e}")))?;
        write_atomically(&run.config.vfio_payload_path(&run.request.claim.uid), &text)
    }

    fn undo(&self, run: &mut PrepareRun<'_>) {
        let path = run.config.vfio_payload_path(&run.request.claim.uid);
        if let Err(error) = remove_durably(&path) {
            tracing::warn!(%error, "cannot remove the QEMU hook payload of a failed prepare");
        }
    }
}
