//! A card serves the MPS claims of one namespace at a time. NVIDIA runs one MPS control daemon for
//! a GPU (Multi-Process Service guide, "Appendix: Common Tasks > Starting and Stopping MPS on
//! Linux > On a Multi-user System"), whose clients meet in one pipe directory and one `/dev/shm`;
//! so gpu-handler refuses to prepare an MPS share of a card whose MPS shares are another
//! namespace's (node-prepare `checks::shares`). Here, for the claims this controller allocates, the
//! same rule keeps such a claim off those cards from the start: before the engine searches, every
//! request of the claim gets one more selector that rules out the MPS offers of the cards other
//! namespaces' MPS claims hold. The engine itself stays the scheduler's twin (the Go differential
//! compares them), and the claim's shape for the engine's memo includes the selector, so claims of
//! two namespaces never share a remembered answer.

use std::collections::BTreeSet;

use dra_allocator::{Allocator, GPU_DRIVER};
use k8s_openapi::api::resource::v1::{CELDeviceSelector, DeviceSelector, ResourceClaim};

use crate::stored_claims::{AllocatedClaim, HeldDevice};

/// The value of the `sharing` attribute on an MPS offer (dra-offers, `SharingStrategy::Mps`).
pub(crate) const MPS_SHARING: &str = "MPS";

/// The results of our driver that other namespaces' claims hold and that may be MPS shares: the
/// handler names an MPS offer `gpu<i>-mps` (dra-offers), and only those are looked up further.
pub(crate) fn others_mps_results<'a>(
    namespace: &str,
    claims: impl Iterator<Item = &'a AllocatedClaim>,
) -> Vec<(Box<str>, Box<str>)> {
    claims
        .filter(|claim| &*claim.namespace != namespace)
        .flat_map(|claim| claim.held.iter())
        .filter(|held: &&HeldDevice| held.device.ends_with("-mps"))
        .map(|held| (held.pool.clone(), held.device.clone()))
        .collect()
}

/// The UUIDs of the cards whose MPS offers `results` (from [`others_mps_results`]) name, as the
/// engine knows the offers from their slices (attributes `sharing` and `uuid`, either spelling).
pub(crate) fn foreign_mps_cards(engine: &Allocator, results: &[(Box<str>, Box<str>)]) -> BTreeSet<String> {
    let attribute = |pool: &str, device: &str, name: &str| {
        let names = [format!("{GPU_DRIVER}/{name}"), name.to_owned()];
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        engine
            .device_labels(GPU_DRIVER, pool, device, &names)
            .and_then(|(value, _)| value.map(str::to_owned))
    };
    results
        .iter()
        .filter(|(pool, device)| attribute(pool, device, "sharing").as_deref() == Some(MPS_SHARING))
        .filter_map(|(pool, device)| attribute(pool, device, "uuid"))
        .collect()
}

/// `claim` with a selector on every request that keeps it off the MPS offers of the cards with the
/// UUIDs `cards`; `None` when there is no such card (the claim goes to the engine as it is).
pub(crate) fn confined(claim: &ResourceClaim, cards: &BTreeSet<String>) -> Option<ResourceClaim> {
    if cards.is_empty() {
        return None;
    }
    let uuids: Vec<String> = cards.iter().map(|uuid| format!("{uuid:?}")).collect();
    let selector = DeviceSelector {
        cel: Some(CELDeviceSelector {
            expression: format!(
                "!(device.driver == \"gpu.deckhouse.io\" && device.attributes[\"gpu.deckhouse.io\"].sharing == \
                 \"{MPS_SHARING}\" && device.attributes[\"gpu.deckhouse.io\"].uuid in [{}])",
                uuids.join(", ")
            ),
        }),
    };
    let mut confined = claim.clone();
    let requests = confined
        .spec
        .devices
        .iter_mut()
        .flat_map(|d| d.requests.iter_mut().flatten());
    for request in requests {
        if let Some(exactly) = &mut request.exactly {
            // Admin access reaches a card without becoming one of its MPS clients (the node gives it
            // no pipe), so it may look at every card of its class.
            if exactly.admin_access != Some(true) {
                exactly.selectors.get_or_insert_with(Vec::new).push(selector.clone());
            }
        }
        for sub in request.first_available.iter_mut().flatten() {
            sub.selectors.get_or_insert_with(Vec::new).push(selector.clone());
        }
    }
    Some(confined)
}

#[cfg(test)]
#[path = "mps_tenancy_tests.rs"]
pub(crate) mod tests;
