//! A card's NVLinks as a machine description gives them: what its links reach, in link order
//! (another card of the machine, or one of its NVSwitches), at most as many as its model has.

use std::path::Path;

use serde::Deserialize;

use crate::machine::Card;
use crate::pci::PciBusId;

/// `links` consecutive active links of a card reaching `remote` (a card or an NVSwitch).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NvLinkSpec {
    pub remote: PciBusId,
    pub links: u32,
}

/// Every link reaches a card or an NVSwitch of the machine, and no card has more links than its
/// model.
pub(crate) fn check(path: &Path, nvswitches: &[PciBusId], cards: &[Card]) -> Result<(), String> {
    for card in cards {
        let links = card.nvlink_remotes.len();
        if links > card.model.nvlink_links as usize {
            return Err(format!(
                "{}: GPU {} lists {links} NVLink links, its model has {}",
                path.display(),
                card.pci_bus_id,
                card.model.nvlink_links
            ));
        }
        let known = |remote: &PciBusId| {
            nvswitches.contains(remote)
                || cards
                    .iter()
                    .any(|c| &c.pci_bus_id == remote && c.pci_bus_id != card.pci_bus_id)
        };
        if let Some(remote) = card.nvlink_remotes.iter().find(|r| !known(r)) {
            return Err(format!(
                "{}: an NVLink of GPU {} reaches {remote}, which is neither another GPU nor an NVSwitch of the machine",
                path.display(),
                card.pci_bus_id
            ));
        }
    }
    Ok(())
}
