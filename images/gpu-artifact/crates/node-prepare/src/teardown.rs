//! Taking a claim's side effects away again, for unprepare, for a claim left
//! `PrepareStarted` by a crash, and for reconciliation: destroy its MIG
//! devices, turn MIG off where nothing needs it any more, remove its CDI spec.
//! The caller removes the checkpoint entry once this succeeded, so a failure
//! leaves the entry for the next attempt.

use std::collections::BTreeSet;

use dra_offers::OfferedDevice;
use gpu_vendor::VendorBackend;

use crate::atomic_file::remove_durably;
use crate::card_mode::disable_if_unused;
use crate::checkpoint::{CheckpointClaim, CheckpointData};
use crate::config::NodePrepareConfig;
use crate::error::PrepareError;

/// Removes what `claim` (UID `uid`, recorded in `checkpoint`) made on the host.
pub(crate) fn tear_down_claim(
    config: &NodePrepareConfig,
    backend: &dyn VendorBackend,
    checkpoint: &CheckpointData,
    uid: &str,
    claim: &CheckpointClaim,
) -> Result<(), PrepareError> {
    let label = claim.label();
    let mut cards = BTreeSet::new();
    for device in &claim.devices {
        let OfferedDevice::Mig {
            pci_address,
            profile_id,
            placement,
            ..
        } = &device.target
        else {
            continue;
        };
        cards.insert(*pci_address);
        let vendor = |source| PrepareError::Vendor {
            claim: label.clone(),
            device: device.device.clone(),
            source,
        };
        let instances = backend.mig_instances(pci_address).map_err(vendor)?;
        // A recorded instance is found by its ids; one created just before a
        // crash (not recorded yet) by its profile and placement, which the
        // checks reserved for this claim alone.
        let found = instances.iter().find(|instance| match &device.mig_instance {
            Some(record) => instance.gpu_instance_id == record.gpu_instance_id && instance.placement == *placement,
            None => instance.profile_id == *profile_id && instance.placement == *placement,
        });
        if let Some(instance) = found {
            backend
                .destroy_mig_device(pci_address, instance.gpu_instance_id)
                .map_err(vendor)?;
            tracing::info!(
                claim = %label, device = %device.device, card = %pci_address,
                gpu_instance = instance.gpu_instance_id, "destroyed MIG device"
            );
        }
    }
    for card in &cards {
        disable_if_unused(backend, card, checkpoint, Some(uid)).map_err(|source| PrepareError::Card {
            card: card.to_string(),
            source,
        })?;
    }
    remove_durably(&config.cdi_spec_path(uid))
}
