//! What each published device name means on the node: the contract between publication and the
//! prepare pipeline. Device names are stable functions of the card and the offer (`gpu<index>`,
//! `gpu<index>-mig-<profile>-<placementStart>`), so a restarted handler resolves the names that an
//! earlier one published.

use std::collections::BTreeMap;

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::{MigPlacement, PciAddress};
use serde::{Deserialize, Serialize};

/// One published device, as the node must realise it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum OfferedDevice {
    /// The whole card, exclusive.
    Physical {
        pci_address: PciAddress,
        /// The card's vendor UUID (`GPU-…`).
        uuid: String,
        /// The PhysicalGPU object of the card.
        physical_gpu: String,
    },
    /// The whole card, shared by every claim it is allocated to with one strategy (TimeSlicing or
    /// MPS); each share consumes part of the offer's `sharePercent` capacity.
    SharedPhysical {
        pci_address: PciAddress,
        uuid: String,
        physical_gpu: String,
        strategy: SharingStrategy,
    },
    /// A MIG partition made on demand at a fixed placement.
    Mig {
        pci_address: PciAddress,
        parent_uuid: String,
        physical_gpu: String,
        profile_id: u32,
        /// The vendor's profile name, e.g. `2g.12gb`.
        profile_name: String,
        placement: MigPlacement,
    },
}

/// The `deviceType` attribute of whole-card offers, shared or not.
pub const DEVICE_TYPE_PHYSICAL: &str = "Physical";
/// The `deviceType` attribute of MIG placements.
pub const DEVICE_TYPE_MIG: &str = "MIG";
/// The `vendor` attribute of every offer: only the NVIDIA backend makes offers today.
pub const VENDOR_NVIDIA: &str = "nvidia";

impl OfferedDevice {
    pub fn pci_address(&self) -> &PciAddress {
        match self {
            OfferedDevice::Physical { pci_address, .. }
            | OfferedDevice::SharedPhysical { pci_address, .. }
            | OfferedDevice::Mig { pci_address, .. } => pci_address,
        }
    }

    /// Its `deviceType` attribute.
    pub fn device_type(&self) -> &'static str {
        match self {
            OfferedDevice::Physical { .. } | OfferedDevice::SharedPhysical { .. } => DEVICE_TYPE_PHYSICAL,
            OfferedDevice::Mig { .. } => DEVICE_TYPE_MIG,
        }
    }

    /// Its `vendor` attribute.
    pub fn vendor(&self) -> &'static str {
        VENDOR_NVIDIA
    }

    /// The PhysicalGPU of its card.
    pub fn physical_gpu(&self) -> &str {
        match self {
            OfferedDevice::Physical { physical_gpu, .. }
            | OfferedDevice::SharedPhysical { physical_gpu, .. }
            | OfferedDevice::Mig { physical_gpu, .. } => physical_gpu,
        }
    }

    /// The vendor UUID of its card (a MIG placement's parent).
    pub fn card_uuid(&self) -> &str {
        match self {
            OfferedDevice::Physical { uuid, .. } | OfferedDevice::SharedPhysical { uuid, .. } => uuid,
            OfferedDevice::Mig { parent_uuid, .. } => parent_uuid,
        }
    }

    /// Its `profile` attribute: the MIG profile's name; empty for a whole card.
    pub fn profile(&self) -> &str {
        match self {
            OfferedDevice::Physical { .. } | OfferedDevice::SharedPhysical { .. } => "",
            OfferedDevice::Mig { profile_name, .. } => profile_name,
        }
    }
}

/// Device name -> what it is, for every device of the node's pool.
pub type DeviceCatalog = BTreeMap<String, OfferedDevice>;
