//! What publication is given: the node's eligible cards and the node's offer policy.

use gpu_vendor::GpuInventory;

/// One card the node may offer (its PhysicalGPU is DriverReady and not unhealthy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardOffering {
    /// The PhysicalGPU object of the card, e.g. `node-a-0-10de-20b7`.
    pub physical_gpu: String,
    /// The card's index on the node (the `<index>` of the PhysicalGPU name): device names use it.
    pub index: u32,
    /// The normalised model, e.g. `a30-pcie` (the PhysicalGPU's `gpu.deckhouse.io/device` label).
    pub device_label: String,
    pub inventory: GpuInventory,
    /// From `status.nodeInfo.bareMetal`; `None` when the node agent could not tell.
    pub bare_metal: Option<bool>,
}

/// The node's label that switches MIG offers off: `gpu.deckhouse.io/allow-mig=false`.
pub const ALLOW_MIG_LABEL: &str = "gpu.deckhouse.io/allow-mig";

/// What the node may offer, independent of the cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferPolicy {
    /// MIG placements are offered (where the card supports MIG).
    pub mig_allowed: bool,
    /// Shared counters are published. `false` is the fallback for an API server that drops them:
    /// whole cards only, because without counters overlapping offers could be allocated together.
    pub counters: bool,
}

impl OfferPolicy {
    /// MIG is allowed unless the node's [`ALLOW_MIG_LABEL`] is exactly `false`.
    pub fn from_allow_mig_label(label: Option<&str>, counters: bool) -> Self {
        Self {
            mig_allowed: label != Some("false"),
            counters,
        }
    }

    /// Whether MIG offers are published at all: they are only safe beside counters.
    pub fn offers_mig(&self) -> bool {
        self.mig_allowed && self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_false_forbids_mig() {
        assert!(OfferPolicy::from_allow_mig_label(None, true).mig_allowed);
        assert!(OfferPolicy::from_allow_mig_label(Some("true"), true).mig_allowed);
        assert!(OfferPolicy::from_allow_mig_label(Some(""), true).mig_allowed);
        assert!(!OfferPolicy::from_allow_mig_label(Some("false"), true).mig_allowed);
    }

    #[test]
    fn mig_needs_counters() {
        assert!(!OfferPolicy::from_allow_mig_label(None, false).offers_mig());
        assert!(OfferPolicy::from_allow_mig_label(None, true).offers_mig());
    }
}
