//! The node's record of prepared claims: what exists on the host because of
//! which claim. It is the only memory the handler has across restarts, so it
//! is written before every side effect (`PrepareStarted`) and after the last
//! one (`PrepareCompleted`).

mod store;

use std::collections::{BTreeMap, BTreeSet};

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::{SharingStrategy, TimeSliceInterval};
use gpu_vendor::PciAddress;
use kubelet_plugin::PreparedDevice;
use serde::{Deserialize, Serialize};

pub(crate) use store::CheckpointStore;

/// The checkpoint's content (the `data` of the file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CheckpointData {
    /// The kernel boot id when the claims were prepared: MIG instances and
    /// `/var/run` files do not survive a reboot, so neither do the records.
    pub boot_id: String,
    /// Claims by UID.
    pub claims: BTreeMap<String, CheckpointClaim>,
    /// Cards whose MIG mode this node turned on for MIG claims (recorded before the switch): the
    /// only cards it turns MIG off on again. A card an admin put in MIG mode is never listed.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub mig_enabled_by_node: BTreeSet<PciAddress>,
    /// Cards in MIG mode that this node turned MIG off on for whole-card claims (recorded before
    /// the switch): MIG goes back on when the last whole-card claim leaves.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub mig_disabled_by_node: BTreeSet<PciAddress>,
}

/// One claim the node has started or finished preparing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointClaim {
    pub namespace: String,
    pub name: String,
    pub state: ClaimState,
    pub devices: Vec<CheckpointDevice>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClaimState {
    /// Side effects may have begun; none is trusted to be complete.
    PrepareStarted,
    /// Every device exists and the CDI spec is written.
    PrepareCompleted,
}

/// One device of a claim and what was made for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointDevice {
    pub request: String,
    pub pool: String,
    pub device: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_id: Option<String>,
    pub target: OfferedDevice,
    /// Fully qualified CDI ids; empty until `PrepareCompleted`.
    #[serde(default)]
    pub cdi_device_ids: Vec<String>,
    /// The MIG device created for a `Mig` target; `None` until created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_instance: Option<MigInstanceRecord>,
    /// Set, under the node lock, once the target's placement was seen free and just before the
    /// instance is created: a crash before `mig_instance` is recorded leaves an instance at that
    /// placement that is this claim's, and only then may a rollback destroy it unrecorded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mig_create_attempted: bool,
    /// For a share: how its card is shared. Every share of a card records the
    /// same value (invariant 2), so this is the card's active sharing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<CardSharing>,
    /// For a card handed to vfio-pci: what was moved and what to give back.
    /// Recorded before the first function is unbound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vfio: Option<VfioRecord>,
    /// Prepared with `adminAccess`: it holds nothing on its card, so the checks and mode
    /// decisions of other claims do not see it (`devices_on_card`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub admin_access: bool,
}

/// How a card is shared: the strategy and its card-wide parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardSharing {
    pub strategy: SharingStrategy,
    /// TimeSlicing only: the card's time slice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<TimeSliceInterval>,
    /// MPS only: the config's `defaultActiveThreadPercentage`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_active_thread_percentage: Option<u8>,
}

/// A card's IOMMU group and the functions moved to vfio-pci with their drivers before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VfioRecord {
    pub iommu_group: u32,
    pub functions: Vec<VfioFunctionRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VfioFunctionRecord {
    /// e.g. `0000:01:00.1`.
    pub address: String,
    /// The driver to bind back on unprepare; `None`: it was unbound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_driver: Option<String>,
}

/// The vendor's ids of a created MIG device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigInstanceRecord {
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub uuid: String,
}

impl CheckpointClaim {
    /// `namespace/name`.
    pub fn label(&self) -> String {
        crate::request::claim_label(&self.namespace, &self.name)
    }

    /// The devices as the kubelet gets them back.
    pub fn prepared_devices(&self) -> Vec<PreparedDevice> {
        self.devices
            .iter()
            .map(|device| PreparedDevice {
                request_names: vec![device.request.clone()],
                pool_name: device.pool.clone(),
                device_name: device.device.clone(),
                cdi_device_ids: device.cdi_device_ids.clone(),
                share_id: device.share_id.clone(),
            })
            .collect()
    }
}

impl CheckpointData {
    /// Every recorded device that holds something on `card`, with its claim's UID and record.
    /// Admin-access devices hold nothing (nothing was made for them) and are left out.
    pub(crate) fn devices_on_card<'a>(
        &'a self,
        card: &'a PciAddress,
    ) -> impl Iterator<Item = (&'a str, &'a CheckpointClaim, &'a CheckpointDevice)> + 'a {
        self.claims.iter().flat_map(move |(uid, claim)| {
            claim
                .devices
                .iter()
                .filter(move |device| device.target.pci_address() == card && !device.admin_access)
                .map(move |device| (uid.as_str(), claim, device))
        })
    }

    /// The shares of `card` recorded for claims other than `except_uid`, with
    /// their claim's label and the card's sharing they recorded.
    pub(crate) fn other_shares_on_card<'a>(
        &'a self,
        card: &'a PciAddress,
        except_uid: &'a str,
    ) -> impl Iterator<Item = (String, &'a CardSharing)> + 'a {
        self.devices_on_card(card)
            .filter(move |(uid, ..)| *uid != except_uid)
            .filter_map(|(_, claim, device)| device.sharing.as_ref().map(|sharing| (claim.label(), sharing)))
    }

    /// Whether any claim other than `except_uid` has a whole-card device (exclusive or shared) on `card`.
    pub(crate) fn has_whole_card_claim_on(&self, card: &PciAddress, except_uid: Option<&str>) -> bool {
        self.devices_on_card(card)
            .any(|(uid, _, device)| Some(uid) != except_uid && !matches!(device.target, OfferedDevice::Mig { .. }))
    }

    /// Whether any claim other than `except_uid` has a MIG device on `card`.
    pub(crate) fn has_mig_claim_on(&self, card: &PciAddress, except_uid: Option<&str>) -> bool {
        self.devices_on_card(card)
            .any(|(uid, _, device)| Some(uid) != except_uid && matches!(device.target, OfferedDevice::Mig { .. }))
    }
}
