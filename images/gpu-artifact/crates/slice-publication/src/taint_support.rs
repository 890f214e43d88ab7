//! Whether the API server keeps device taints, and what the node says when it does not.
//!
//! A server whose `DRADeviceTaints` gate is off silently drops `taints` (alpha on 1.34-1.35).
//! Unlike counters, a dropped taint would leave an unhealthy card published as healthy, so support
//! is probed with a dry-run apply the first time a publication carries taints: nothing reaches the
//! scheduler before the answer is known. Without support, the cards whose taints keep claims off
//! are withheld (the module's behaviour before taints), with a Warning Event on the Node naming
//! them, and `gpu_handler_offers_reduced{reason="TaintsDropped"} 1`.

use std::collections::BTreeSet;

use dra_offers::{CardOffering, OfferPolicy, pool_name, taints_dropped};
use k8s_openapi::api::resource::v1::ResourceSlice;

use crate::node_watch::NodeView;
use crate::store::SliceStore;

/// The Event reason on the Node when the server dropped our taints.
pub const TAINTS_UNSUPPORTED: &str = "DeviceTaintsUnsupported";
/// The Event reason on the Node when unhealthy GPUs are withheld from the pool.
pub const UNHEALTHY_WITHDRAWN: &str = "UnhealthyGPUsWithdrawn";

/// What the publisher knows about the server's taint support.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintSupport {
    Unknown,
    Supported,
    Dropped,
}

/// Whether any slice carries a taint.
pub fn carries_taints(slices: &[ResourceSlice]) -> bool {
    slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .any(|d| d.taints.as_ref().is_some_and(|t| !t.is_empty()))
}

/// Dry-run applies the first tainted slice and compares; `Err` only when the server refused.
pub async fn probe(store: &SliceStore, slices: &[ResourceSlice]) -> anyhow::Result<Option<String>> {
    let Some(tainted) = slices.iter().find(|s| carries_taints(std::slice::from_ref(*s))) else {
        return Ok(None);
    };
    let kept = store.dry_run_apply(tainted).await?;
    Ok(taints_dropped(
        std::slice::from_ref(tainted),
        std::slice::from_ref(&kept),
    ))
}

/// The Node Event for a server that dropped taints.
pub fn unsupported_note(node: &NodeView, reason: &str) -> String {
    format!(
        "The API server dropped device taints from the ResourceSlices of pool {} ({reason}). The DRADeviceTaints \
         feature gate must be enabled on kube-apiserver, kube-scheduler and kube-controller-manager. Unhealthy GPUs \
         are withdrawn from the pool instead of being published tainted, until gpu-handler restarts with the gate on.",
        pool_name(&node.name)
    )
}

/// The cards `policy` withholds, as `<PhysicalGPU> (<key>=<value>:<effect>, ...)`.
pub fn withheld(cards: &[CardOffering], policy: OfferPolicy) -> BTreeSet<String> {
    cards
        .iter()
        .filter(|card| !policy.publishes(card))
        .map(|card| {
            let taints: Vec<String> = card
                .taints
                .iter()
                .map(|t| format!("{}={}:{}", t.key, t.value.as_deref().unwrap_or_default(), t.effect))
                .collect();
            format!("{} ({})", card.physical_gpu, taints.join(", "))
        })
        .collect()
}

/// The Node Event naming the withheld cards.
pub fn withheld_note(node: &NodeView, cards: &BTreeSet<String>) -> String {
    let list: Vec<&str> = cards.iter().map(String::as_str).collect();
    format!(
        "Unhealthy GPUs withdrawn from pool {}: {}. The API server cannot carry device taints (DRADeviceTaints), so \
         they are not offered until they recover; the HardwareHealthy condition of each PhysicalGPU says why.",
        pool_name(&node.name),
        list.join("; ")
    )
}
