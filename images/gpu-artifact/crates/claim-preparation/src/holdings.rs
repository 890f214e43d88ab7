//! How the node's cards are held, from its checkpoint: what publication needs to leave out the
//! offers a held card cannot give (`dra_offers::withheld`). Claims still `PrepareStarted` count:
//! their prepare is in flight, and offering past it would invite the allocation it must refuse.

use std::collections::BTreeMap;

use dra_offers::{CardHolding, CardHoldings, OfferedDevice};
use gpu_vendor::{MigPlacement, PciAddress};
use node_prepare::CheckpointClaim;

/// The holding of every card a recorded claim uses, and the placements of MIG instances no claim
/// records (`foreign`).
pub fn card_holdings(
    claims: &BTreeMap<String, CheckpointClaim>,
    foreign: &[(PciAddress, MigPlacement)],
) -> CardHoldings {
    let mut holdings = CardHoldings::new();
    for (card, placement) in foreign {
        holdings.foreign_mig.entry(*card).or_default().push(*placement);
    }
    for device in claims.values().flat_map(|claim| &claim.devices) {
        let holding = match &device.target {
            OfferedDevice::SharedPhysical { strategy, .. } => CardHolding::Shared(*strategy),
            OfferedDevice::Physical { .. } | OfferedDevice::Mig { .. } => CardHolding::Whole,
        };
        // A card both shared and held whole cannot be prepared that way; if a checkpoint says so
        // anyway, holding it whole withholds every shared offer, the safer side.
        holdings
            .held
            .entry(*device.target.pci_address())
            .and_modify(|held| {
                if holding == CardHolding::Whole {
                    *held = CardHolding::Whole;
                }
            })
            .or_insert(holding);
    }
    holdings
}
