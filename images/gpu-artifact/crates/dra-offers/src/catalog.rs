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

impl OfferedDevice {
    pub fn pci_address(&self) -> &PciAddress {
        match self {
            OfferedDevice::Physical { pci_address, .. }
            | OfferedDevice::SharedPhysical { pci_address, .. }
            | OfferedDevice::Mig { pci_address, .. } => pci_address,
        }
    }
}

/// Device name -> what it is, for every device of the node's pool.
pub type DeviceCatalog = BTreeMap<String, OfferedDevice>;
