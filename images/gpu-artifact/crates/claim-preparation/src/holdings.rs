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
    // An admin-access result holds nothing on its card: its offers stay for the claims that hold.
    let held = claims
        .values()
        .flat_map(|claim| &claim.devices)
        .filter(|device| !device.admin_access);
    for device in held {
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

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_api::opaque_config::SharingStrategy;
    use node_prepare::{CheckpointDevice, ClaimState};

    fn claim(admin_access: bool, target: OfferedDevice) -> CheckpointClaim {
        CheckpointClaim {
            namespace: "ns".into(),
            name: "c".into(),
            state: ClaimState::PrepareCompleted,
            devices: vec![CheckpointDevice {
                request: "gpu".into(),
                pool: "gpus/w1".into(),
                device: "gpu0".into(),
                share_id: None,
                target,
                cdi_device_ids: Vec::new(),
                mig_instance: None,
                mig_create_attempted: false,
                sharing: None,
                vfio: None,
                admin_access,
            }],
        }
    }

    #[test]
    fn an_admin_access_result_holds_no_card_and_withholds_no_offer() {
        let card: PciAddress = "0000:01:00.0".parse().unwrap();
        let share = OfferedDevice::SharedPhysical {
            pci_address: card,
            uuid: "GPU-1".into(),
            physical_gpu: "w1-a30-0".into(),
            strategy: SharingStrategy::Mps,
        };
        let whole = OfferedDevice::Physical {
            pci_address: card,
            uuid: "GPU-1".into(),
            physical_gpu: "w1-a30-0".into(),
        };
        let claims = BTreeMap::from([
            ("admin-share".to_owned(), claim(true, share.clone())),
            ("admin-whole".to_owned(), claim(true, whole)),
        ]);
        assert!(
            card_holdings(&claims, &[]).held.is_empty(),
            "admin access holds nothing"
        );
        let claims = BTreeMap::from([("user".to_owned(), claim(false, share))]);
        assert_eq!(
            card_holdings(&claims, &[]).held.get(&card),
            Some(&CardHolding::Shared(SharingStrategy::Mps))
        );
    }
}
