//! Invariant 2 for shares, against the claim itself and every recorded claim.

use std::collections::BTreeSet;

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::PciAddress;

use crate::checkpoint::{CardSharing, CheckpointData};
use crate::device_plan::DevicePlan;
use crate::request::PrepareRequest;

/// Invariant 2 for shares: every share of a card uses the card's active
/// sharing (the one its other claims recorded), and one claim reaches at most
/// one MPS control daemon (a container has one `CUDA_MPS_PIPE_DIRECTORY`), and the MPS shares of a
/// card belong to one namespace at a time ([`another_namespace_uses_mps`]).
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
            if another_namespace_uses_mps(checkpoint, card, &request.claim.uid, &request.claim.namespace) {
                return Err(format!(
                    "device {}: another namespace's MPS clients use card {card}; the clients of a card's MPS \
                     control daemon share its /dev/shm, so a card serves the MPS claims of one namespace at a time",
                    device.device
                ));
            }
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

/// Whether a claim of a namespace other than `namespace` holds an MPS share of `card`. NVIDIA
/// documents one control daemon serving a GPU, one MPS server at a time on it (NVIDIA Multi-Process
/// Service guide, "Appendix: Common Tasks > Starting and Stopping MPS on Linux > On a Multi-user
/// System": the GPU set to EXCLUSIVE_PROCESS, "Only one instance of the nvidia-cuda-mps-control
/// daemon should be run per node"; "Limitations": exclusive-mode restrictions apply to the MPS
/// server), and never a second daemon on the same GPU. So a card's MPS clients all meet in one
/// daemon and its `/dev/shm`, and the card serves one namespace's MPS claims until the last is gone.
/// The answer names no claim: the other namespace is not the asker's to know.
fn another_namespace_uses_mps(
    checkpoint: &CheckpointData,
    card: &PciAddress,
    except_uid: &str,
    namespace: &str,
) -> bool {
    checkpoint.devices_on_card(card).any(|(uid, claim, device)| {
        uid != except_uid
            && claim.namespace != namespace
            && device
                .sharing
                .as_ref()
                .is_some_and(|sharing| sharing.strategy == SharingStrategy::Mps)
    })
}
