//! What a card is held as on the node right now, and which of its offers that rules out.
//!
//! The card's counters already make its offers exclude one another, but the 1.34 and 1.35
//! schedulers do not charge committed shares of a multi-allocatable device to the counters when
//! they rebuild them (fixed in 1.36.2): they allocate the whole card, a MIG placement or another
//! strategy's share beside shares in use, and the node can only refuse the prepare, leaving the
//! Pod bound and never running. So the node does not publish what cannot be prepared:
//! - a card held by shares of one strategy offers only that strategy's shared offer;
//! - a card held whole or partitioned (an exclusive allocation, MIG devices) offers no shared offer.
//!
//! MIG instances the node did not make (an admin's, or a lost checkpoint's: it never destroys them)
//! take their memory slices and the whole card: their overlapping placements, the whole card and
//! its shares are not published either.
//!
//! The counters stay the rule for everything else, and the node's refusal stays the safety net
//! for an allocation made before the offers changed. Withheld offers stay in the catalog, so such
//! an allocation still resolves and is refused with the real reason.

use std::collections::BTreeMap;

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::{MigPlacement, PciAddress};

use crate::catalog::OfferedDevice;

/// How a card is held by the claims prepared (or being prepared) on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardHolding {
    /// Shares of one strategy.
    Shared(SharingStrategy),
    /// An exclusive whole-card allocation or MIG devices.
    Whole,
}

/// How the node's cards are held; a card in neither map is free.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardHoldings {
    /// Cards held by the node's claims.
    pub held: BTreeMap<PciAddress, CardHolding>,
    /// Placements of MIG instances no claim of the node records, by card.
    pub foreign_mig: BTreeMap<PciAddress, Vec<MigPlacement>>,
}

impl CardHoldings {
    pub fn new() -> Self {
        Self::default()
    }
}

/// Whether `offered` is left out of the published slices while its card is held as `holdings` say.
pub fn withheld(offered: &OfferedDevice, holdings: &CardHoldings) -> bool {
    let card = offered.pci_address();
    if let Some(foreign) = holdings.foreign_mig.get(card).filter(|f| !f.is_empty()) {
        return match offered {
            OfferedDevice::Mig { placement, .. } => foreign.iter().any(|f| f.overlaps(placement)),
            OfferedDevice::Physical { .. } | OfferedDevice::SharedPhysical { .. } => true,
        };
    }
    let Some(holding) = holdings.held.get(card) else {
        return false;
    };
    match (holding, offered) {
        (CardHolding::Shared(held), OfferedDevice::SharedPhysical { strategy, .. }) => strategy != held,
        (CardHolding::Shared(_), _) => true,
        (CardHolding::Whole, OfferedDevice::SharedPhysical { .. }) => true,
        (CardHolding::Whole, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_vendor::MigPlacement;

    fn card() -> PciAddress {
        "0000:01:00.0".parse().unwrap()
    }

    fn offers() -> Vec<(&'static str, OfferedDevice)> {
        let shared = |strategy| OfferedDevice::SharedPhysical {
            pci_address: card(),
            uuid: "GPU-1".into(),
            physical_gpu: "w1-0".into(),
            strategy,
        };
        vec![
            (
                "whole",
                OfferedDevice::Physical {
                    pci_address: card(),
                    uuid: "GPU-1".into(),
                    physical_gpu: "w1-0".into(),
                },
            ),
            ("mps", shared(SharingStrategy::Mps)),
            ("timeslicing", shared(SharingStrategy::TimeSlicing)),
            (
                "mig",
                OfferedDevice::Mig {
                    pci_address: card(),
                    parent_uuid: "GPU-1".into(),
                    physical_gpu: "w1-0".into(),
                    profile_id: 5,
                    profile_name: "2g.12gb".into(),
                    placement: MigPlacement { start: 0, size: 2 },
                },
            ),
        ]
    }

    fn published(holding: Option<CardHolding>) -> Vec<&'static str> {
        let holdings = CardHoldings {
            held: holding.map(|h| (card(), h)).into_iter().collect(),
            ..CardHoldings::default()
        };
        offers()
            .into_iter()
            .filter(|(_, offered)| !withheld(offered, &holdings))
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn a_free_card_offers_everything() {
        assert_eq!(published(None), ["whole", "mps", "timeslicing", "mig"]);
    }

    #[test]
    fn shares_keep_only_their_own_shared_offer() {
        assert_eq!(published(Some(CardHolding::Shared(SharingStrategy::Mps))), ["mps"]);
        assert_eq!(
            published(Some(CardHolding::Shared(SharingStrategy::TimeSlicing))),
            ["timeslicing"]
        );
    }

    #[test]
    fn an_instance_the_node_did_not_make_takes_its_slices_and_the_whole_card() {
        let mut holdings = CardHoldings::new();
        holdings
            .foreign_mig
            .insert(card(), vec![MigPlacement { start: 0, size: 2 }]);
        let left: Vec<&str> = offers()
            .into_iter()
            .filter(|(_, offered)| !withheld(offered, &holdings))
            .map(|(name, _)| name)
            .collect();
        assert!(left.is_empty(), "{left:?}");
        holdings
            .foreign_mig
            .insert(card(), vec![MigPlacement { start: 2, size: 2 }]);
        let left: Vec<&str> = offers()
            .into_iter()
            .filter(|(_, offered)| !withheld(offered, &holdings))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(left, ["mig"], "a placement beside it stays offered");
    }

    #[test]
    fn a_card_held_whole_or_partitioned_offers_no_share() {
        assert_eq!(published(Some(CardHolding::Whole)), ["whole", "mig"]);
    }
}
