//! NVLink domains: which of a node's cards reach each other over NVLink, directly (a bridge) or
//! through NVSwitches (an HGX board, where every card reaches every other). A domain is a set of
//! cards joined by the links the vendor library reports (`GpuInventory::nvlink_remotes`): the
//! connected parts of the graph of cards and the endpoints their links reach. It is published as
//! the attribute `gpu.deckhouse.io/nvlinkDomain` on every offer of its cards, so best fit and a
//! claim's `matchAttribute` constraint can keep a request's devices on one NVLink fabric. A card
//! whose links join no other card is in no domain.
//!
//! The domain is named by the lowest PCI address among its cards and switches: stable while the
//! links are, whichever of its cards are offered.

use std::collections::BTreeMap;

use gpu_vendor::{GpuInventory, PciAddress};

/// The domain of every card that shares one with another card, by the card's PCI address.
pub fn nvlink_domains(cards: &[&GpuInventory]) -> BTreeMap<PciAddress, String> {
    // Union-find over cards and link endpoints, by address.
    let mut parent: BTreeMap<PciAddress, PciAddress> = BTreeMap::new();
    fn root(parent: &mut BTreeMap<PciAddress, PciAddress>, at: PciAddress) -> PciAddress {
        let up = *parent.entry(at).or_insert(at);
        if up == at {
            return at;
        }
        let top = root(parent, up);
        parent.insert(at, top);
        top
    }
    for card in cards {
        root(&mut parent, card.pci_address);
        for remote in &card.nvlink_remotes {
            let (a, b) = (root(&mut parent, card.pci_address), root(&mut parent, *remote));
            // The lower address becomes the root, so a domain's root is its lowest address.
            let (low, high) = if a <= b { (a, b) } else { (b, a) };
            parent.insert(high, low);
        }
    }
    let mut cards_of: BTreeMap<PciAddress, Vec<PciAddress>> = BTreeMap::new();
    for card in cards {
        let top = root(&mut parent, card.pci_address);
        cards_of.entry(top).or_default().push(card.pci_address);
    }
    cards_of
        .into_iter()
        .filter(|(_, members)| members.len() > 1)
        .flat_map(|(top, members)| members.into_iter().map(move |card| (card, top.to_string())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(address: &str, remotes: &[&str]) -> GpuInventory {
        GpuInventory {
            pci_address: address.parse().unwrap(),
            uuid: format!("GPU-{address}"),
            product_name: "NVIDIA H100 80GB HBM3".into(),
            architecture: None,
            board_part_number: None,
            memory_mib: 81559,
            compute_capability: None,
            driver_version: "580.76.05".into(),
            runtime_version: None,
            power_limits: None,
            mig: None,
            nvlink_remotes: remotes.iter().map(|r| r.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn cards_joined_through_switches_or_bridges_share_a_domain_and_lone_cards_have_none() {
        let switches = ["0000:05:00.0", "0000:06:00.0"];
        let cards = [
            card("0000:18:00.0", &switches),
            card("0000:2a:00.0", &switches[1..]),
            // A bridged pair, and a card without NVLink.
            card("0000:81:00.0", &["0000:82:00.0"]),
            card("0000:82:00.0", &["0000:81:00.0"]),
            card("0000:c1:00.0", &[]),
            // Links to a switch no other card reaches: alone all the same.
            card("0000:d1:00.0", &["0000:0f:00.0"]),
        ];
        let domains = nvlink_domains(&cards.iter().collect::<Vec<_>>());
        let domain = |card: &str| domains.get(&card.parse().unwrap()).cloned();
        assert_eq!(
            domain("0000:18:00.0").as_deref(),
            Some("0000:05:00.0"),
            "named by its lowest address"
        );
        assert_eq!(domain("0000:2a:00.0").as_deref(), Some("0000:05:00.0"));
        assert_eq!(domain("0000:81:00.0").as_deref(), Some("0000:81:00.0"));
        assert_eq!(domain("0000:82:00.0").as_deref(), Some("0000:81:00.0"));
        assert_eq!(domain("0000:c1:00.0"), None);
        assert_eq!(domain("0000:d1:00.0"), None);
    }
}
