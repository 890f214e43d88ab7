//! The parts of a teardown, in their fixed order: cards back from vfio-pci, the card's sharing
//! undone when its last share leaves, the claim's MIG devices destroyed, the cards' MIG mode given
//! back where the node changed it, the CDI spec and the QEMU hook payload removed.

use std::collections::BTreeSet;

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::{SharingStrategy, TimeSliceInterval};
use gpu_vendor::VendorError;
use host_inventory::HostRoot;

use super::{Teardown, TeardownPart};
use crate::atomic_file::remove_durably;
use crate::bounded_vendor::mig_create_running;
use crate::card_mode::restore_if_unneeded;
use crate::error::PrepareError;
use crate::mps_daemon::stop_mps_daemon;
use crate::time_slice::set_time_slice;
use crate::vfio_passthrough::give_back;

pub(crate) const TEARDOWN_PARTS: [&dyn TeardownPart; 6] = [
    &GiveBackVfio,
    &UndoSharing,
    &DestroyMigDevices,
    &RestoreMigMode,
    &RemoveCdiSpec,
    &RemoveVfioPayload,
];

struct GiveBackVfio;

impl TeardownPart for GiveBackVfio {
    fn id(&self) -> &'static str {
        "give-back-vfio"
    }

    fn run(&self, t: &mut Teardown<'_>) -> Result<(), PrepareError> {
        let root = HostRoot::new(&t.config.host_root);
        for device in &t.claim.devices {
            if let Some(record) = &device.vfio {
                give_back(&root, record, t.config.vfio_bind_timeout).map_err(|source| PrepareError::Vfio {
                    claim: t.claim.label(),
                    card: device.target.pci_address().to_string(),
                    source: Box::new(source),
                })?;
            }
        }
        Ok(())
    }
}

/// The card's last share leaving takes the card's sharing with it.
struct UndoSharing;

impl TeardownPart for UndoSharing {
    fn id(&self) -> &'static str {
        "undo-sharing"
    }

    fn run(&self, t: &mut Teardown<'_>) -> Result<(), PrepareError> {
        let mut done = BTreeSet::new();
        for device in &t.claim.devices {
            let (Some(sharing), OfferedDevice::SharedPhysical { pci_address, uuid, .. }) =
                (&device.sharing, &device.target)
            else {
                continue;
            };
            if !done.insert(*pci_address) || t.checkpoint.other_shares_on_card(pci_address, t.uid).next().is_some() {
                continue;
            }
            match sharing.strategy {
                SharingStrategy::TimeSlicing => set_time_slice(t.config, uuid, TimeSliceInterval::Default)?,
                SharingStrategy::Mps => {
                    stop_mps_daemon(t.config, &pci_address.to_string())?;
                }
                SharingStrategy::Exclusive => {}
            }
        }
        Ok(())
    }
}

/// Destroys the MIG devices the checkpoint says this claim made: found by their recorded ids, or,
/// for a device a crash kept from being recorded, by profile and placement, and then only when
/// the record says its creation was attempted on a placement seen free under the node lock. A
/// creation given up on that is still in the vendor library is waited for (the teardown fails and
/// is retried): what it makes after the look would be nobody's.
struct DestroyMigDevices;

impl TeardownPart for DestroyMigDevices {
    fn id(&self) -> &'static str {
        "destroy-mig-devices"
    }

    fn run(&self, t: &mut Teardown<'_>) -> Result<(), PrepareError> {
        let label = t.claim.label();
        for device in &t.claim.devices {
            let OfferedDevice::Mig {
                pci_address,
                profile_id,
                placement,
                ..
            } = &device.target
            else {
                continue;
            };
            if device.mig_instance.is_none() && !device.mig_create_attempted {
                continue;
            }
            let vendor = |source| PrepareError::Vendor {
                claim: label.clone(),
                device: device.device.clone(),
                source,
            };
            if mig_create_running(&t.config.plugin_dir, pci_address, placement) {
                return Err(vendor(VendorError::Failed {
                    call: "create a MIG device".into(),
                    reason: format!(
                        "the creation on card {pci_address} (memory slices {}..{}) given up on in an earlier \
                         attempt has not returned yet; the claim is rolled back once it has",
                        placement.start,
                        placement.end()
                    ),
                }));
            }
            let instances = t.backend.mig_instances(pci_address).map_err(vendor)?;
            let found = instances.iter().find(|instance| match &device.mig_instance {
                Some(record) => instance.gpu_instance_id == record.gpu_instance_id && instance.placement == *placement,
                None => instance.profile_id == *profile_id && instance.placement == *placement,
            });
            if let Some(instance) = found {
                t.backend
                    .destroy_mig_device(pci_address, instance.gpu_instance_id)
                    .map_err(vendor)?;
                tracing::info!(
                    claim = %label, device = %device.device, card = %pci_address,
                    gpu_instance = instance.gpu_instance_id, "destroyed MIG device"
                );
            }
        }
        Ok(())
    }
}

struct RestoreMigMode;

impl TeardownPart for RestoreMigMode {
    fn id(&self) -> &'static str {
        "restore-mig-mode"
    }

    fn run(&self, t: &mut Teardown<'_>) -> Result<(), PrepareError> {
        // An admin-access device changed no mode: leaving, it has none to give back.
        let held = t.claim.devices.iter().filter(|d| !d.admin_access);
        let cards: BTreeSet<_> = held.map(|d| *d.target.pci_address()).collect();
        for card in &cards {
            restore_if_unneeded(t.backend, t.store, t.checkpoint, card, Some(t.uid))?;
        }
        Ok(())
    }
}

struct RemoveCdiSpec;

impl TeardownPart for RemoveCdiSpec {
    fn id(&self) -> &'static str {
        "remove-cdi-spec"
    }

    fn run(&self, t: &mut Teardown<'_>) -> Result<(), PrepareError> {
        remove_durably(&t.config.cdi_spec_path(t.uid))
    }
}

struct RemoveVfioPayload;

impl TeardownPart for RemoveVfioPayload {
    fn id(&self) -> &'static str {
        "remove-vfio-payload"
    }

    fn run(&self, t: &mut Teardown<'_>) -> Result<(), PrepareError> {
        remove_durably(&t.config.vfio_payload_path(t.uid))
    }
}
