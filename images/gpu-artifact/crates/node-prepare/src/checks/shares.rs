//! Invariant 2 for shares, against the claim itself and every recorded claim.

use std::collections::BTreeSet;

use crate::checkpoint::{CardSharing, CheckpointData};
use crate::device_plan::DevicePlan;
use crate::request::PrepareRequest;

/// Invariant 2 for shares: every share of a card uses the card's active
/// sharing (the one its other claims recorded), and one claim reaches at most
/// one MPS control daemon (a container has one `CUDA_MPS_PIPE_DIRECTORY`).
pub(super) fn check_shares(
    request: &PrepareRequest,
    plans: &[DevicePlan],
    checkpoint: &CheckpointData,
) -> Result<(), String> {
    let mut mps_cards = BTreeSet::new();
    for (index, (device, plan)) in request.devices.iter().zip(plans).enumerate() {
        let Some(asked) = &plan.sharing else { continue };
        let card = device.target.pci_address();
        let own = request
            .devices
            .iter()
            .take(index)
            .zip(plans)
            .find(|(other, other_plan)| {
                other.target.pci_address() == card && other_plan.sharing.as_ref().is_some_and(|s| s != asked)
            });
        if let Some((other, other_plan)) = own {
            let theirs = other_plan.sharing.as_ref().map(ToString::to_string).unwrap_or_default();
            return Err(format!(
                "device {} and device {} of the same claim share card {card} differently: {asked} and {theirs}",
                device.device, other.device
            ));
        }
        let differing: Vec<(String, &CardSharing)> = checkpoint
            .other_shares_on_card(card, &request.claim.uid)
            .filter(|(_, active)| *active != asked)
            .collect();
        if let Some((_, active)) = differing.first() {
            let claims: BTreeSet<&str> = differing
                .iter()
                .filter(|(_, sharing)| sharing == active)
                .map(|(label, _)| label.as_str())
                .collect();
            let claims: Vec<&str> = claims.into_iter().collect();
            return Err(format!(
                "card {card} is shared with {active} by claims {}; this share asks for {asked}",
                claims.join(", ")
            ));
        }
        if plan.active_thread_percentage.is_some() {
            mps_cards.insert(*card);
        }
    }
    if mps_cards.len() > 1 {
        let cards: Vec<String> = mps_cards.iter().map(ToString::to_string).collect();
        return Err(format!(
            "the claim has MPS shares of cards {}; a container reaches one MPS control daemon, so one claim may share one card with MPS",
            cards.join(" and ")
        ));
    }
    Ok(())
}
