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
//! The counters stay the rule for everything else, and the node's refusal stays the safety net
//! for an allocation made before the offers changed. Withheld offers stay in the catalog, so such
//! an allocation still resolves and is refused with the real reason.

use std::collections::BTreeMap;

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::PciAddress;

use crate::catalog::OfferedDevice;

/// How a card is held by the claims prepared (or being prepared) on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardHolding {
    /// Shares of one strategy.
    Shared(SharingStrategy),
    /// An exclusive whole-card allocation or MIG devices.
    Whole,
}

/// Holdings by card; a card not listed is free.
pub type CardHoldings = BTreeMap<PciAddress, CardHolding>;

/// Whether `offered` is left out of the published slices while its card is held as `holdings` say.
pub fn withheld(offered: &OfferedDevice, holdings: &CardHoldings) -> bool {
    let Some(holding) = holdings.get(offered.pci_address()) else {
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
        let holdings: CardHoldings = holding.map(|h| (card(), h)).into_iter().collect();
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
    fn a_card_held_whole_or_partitioned_offers_no_share() {
        assert_eq!(published(Some(CardHolding::Whole)), ["whole", "mig"]);
    }
}
