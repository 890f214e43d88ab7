//! Taking a claim's side effects away again, for unprepare, for a claim left
//! `PrepareStarted` by a crash, and for reconciliation: give cards on
//! vfio-pci back to their drivers, undo a card's sharing when its last share
//! leaves (time slice back to Default, MPS daemon stopped), destroy its MIG
//! devices, turn MIG off where nothing needs it any more, remove its CDI spec
//! and QEMU hook payload. Every part is safe to repeat.
//! The caller removes the checkpoint entry once this succeeded, so a failure
//! leaves the entry for the next attempt.

use std::collections::BTreeSet;

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::{SharingStrategy, TimeSliceInterval};
use gpu_vendor::VendorBackend;
use host_inventory::HostRoot;

use crate::atomic_file::remove_durably;
use crate::card_mode::disable_if_unused;
use crate::checkpoint::{CheckpointClaim, CheckpointData};
use crate::config::NodePrepareConfig;
use crate::error::PrepareError;
use crate::mps_daemon::stop_mps_daemon;
use crate::time_slice::set_time_slice;
use crate::vfio_passthrough::give_back;

/// Removes what `claim` (UID `uid`, recorded in `checkpoint`) made on the host.
pub(crate) fn tear_down_claim(
    config: &NodePrepareConfig,
    backend: &dyn VendorBackend,
    checkpoint: &CheckpointData,
    uid: &str,
    claim: &CheckpointClaim,
) -> Result<(), PrepareError> {
    let label = claim.label();
    give_back_vfio_cards(config, claim)?;
    undo_sharing(config, checkpoint, uid, claim)?;
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
    remove_durably(&config.cdi_spec_path(uid))?;
    remove_durably(&config.vfio_payload_path(uid))
}

fn give_back_vfio_cards(config: &NodePrepareConfig, claim: &CheckpointClaim) -> Result<(), PrepareError> {
    let root = HostRoot::new(&config.host_root);
    for device in &claim.devices {
        if let Some(record) = &device.vfio {
            give_back(&root, record, config.vfio_bind_timeout).map_err(|source| PrepareError::Vfio {
                claim: claim.label(),
                card: device.target.pci_address().to_string(),
                source: Box::new(source),
            })?;
        }
    }
    Ok(())
}

/// The card's last share leaving takes the card's sharing with it.
fn undo_sharing(
    config: &NodePrepareConfig,
    checkpoint: &CheckpointData,
    uid: &str,
    claim: &CheckpointClaim,
) -> Result<(), PrepareError> {
    let mut done = BTreeSet::new();
    for device in &claim.devices {
        let (Some(sharing), OfferedDevice::SharedPhysical { pci_address, uuid, .. }) =
            (&device.sharing, &device.target)
        else {
            continue;
        };
        if !done.insert(*pci_address) || checkpoint.other_shares_on_card(pci_address, uid).next().is_some() {
            continue;
        }
        match sharing.strategy {
            SharingStrategy::TimeSlicing => set_time_slice(config, uuid, TimeSliceInterval::Default)?,
            SharingStrategy::Mps => {
                stop_mps_daemon(config, &pci_address.to_string())?;
            }
            SharingStrategy::Exclusive => {}
        }
    }
    Ok(())
}
