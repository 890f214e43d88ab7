//! What publication is given: the node's eligible cards and the node's offer policy.

use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::GpuInventory;
use k8s_openapi::api::resource::v1::DeviceTaint;

/// The taint effects that keep new claims off a device (`None` is informational only).
pub const EFFECT_NO_SCHEDULE: &str = "NoSchedule";
pub const EFFECT_NO_EXECUTE: &str = "NoExecute";
pub const EFFECT_NONE: &str = "None";

/// One card the node may offer (its PhysicalGPU is DriverReady and the card answers; an unhealthy
/// card comes with the taints its health calls for).
#[derive(Debug, Clone, PartialEq)]
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
    /// The card's health taints; every offer of the card carries them (a MIG placement inherits
    /// its card's). Empty for a healthy card.
    pub taints: Vec<DeviceTaint>,
    /// From `status.pciInfo.pcieRoot`: the PCIe root complex, `pci<domain>:<bus>`.
    pub pcie_root: Option<String>,
    /// From `status.pciInfo.numaNode` (sysfs `numa_node`): the NUMA node the card is attached to;
    /// `None` when the platform gives it no affinity.
    pub numa_node: Option<i64>,
    /// The card's NVLink domain (see [`crate::nvlink_domains`]); `None` when NVLink joins it to no
    /// other card.
    pub nvlink_domain: Option<String>,
}

impl CardOffering {
    /// Whether a taint keeps new claims off the card (effect NoSchedule or NoExecute).
    pub fn keeps_claims_off(&self) -> bool {
        self.taints
            .iter()
            .any(|t| t.effect == EFFECT_NO_SCHEDULE || t.effect == EFFECT_NO_EXECUTE)
    }
}

/// The node's label that switches MIG offers off: `gpu.deckhouse.io/allow-mig=false`.
pub const ALLOW_MIG_LABEL: &str = "gpu.deckhouse.io/allow-mig";
/// The node's label that adds a TimeSlicing shared offer per card: `gpu.deckhouse.io/allow-timeslicing=true`.
pub const ALLOW_TIMESLICING_LABEL: &str = "gpu.deckhouse.io/allow-timeslicing";
/// The node's label that adds an MPS shared offer per card: `gpu.deckhouse.io/allow-mps=true`.
pub const ALLOW_MPS_LABEL: &str = "gpu.deckhouse.io/allow-mps";

/// What the node may offer, independent of the cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfferPolicy {
    /// MIG placements are offered (where the card supports MIG).
    pub mig_allowed: bool,
    /// Each card also has a shared TimeSlicing offer.
    pub time_slicing_allowed: bool,
    /// Each card also has a shared MPS offer.
    pub mps_allowed: bool,
    /// Shared counters are published. `false` is the fallback for an API server that drops them:
    /// whole cards only, because without counters overlapping offers could be allocated together.
    pub counters: bool,
    /// `allowMultipleAllocations` and capacity `requestPolicy` are published. `false` is the
    /// fallback for an API server that drops them (gate `DRAConsumableCapacity` off): a shared
    /// offer would then be a second exclusive copy of the card.
    pub sharing: bool,
    /// Device taints are published. `false` is the fallback for an API server that drops them
    /// (gate `DRADeviceTaints` off): a card whose taints keep claims off is withheld instead.
    pub taints: bool,
    /// The server knows the taint effect `None` (1.35 and newer); without it informational taints
    /// are left out.
    pub none_effect: bool,
}

impl OfferPolicy {
    /// The policy the node's labels ask for, assuming the server keeps every field: MIG unless
    /// [`ALLOW_MIG_LABEL`] is exactly `false`; a sharing strategy only when its label
    /// ([`ALLOW_TIMESLICING_LABEL`], [`ALLOW_MPS_LABEL`]) is exactly `true` (exclusive by default).
    pub fn from_node_labels(
        allow_mig: Option<&str>,
        allow_time_slicing: Option<&str>,
        allow_mps: Option<&str>,
    ) -> Self {
        Self {
            mig_allowed: allow_mig != Some("false"),
            time_slicing_allowed: allow_time_slicing == Some("true"),
            mps_allowed: allow_mps == Some("true"),
            counters: true,
            sharing: true,
            taints: true,
            none_effect: true,
        }
    }

    /// Whether `card` is published: withheld when its taints keep claims off and the server
    /// cannot carry taints.
    pub fn publishes(&self, card: &CardOffering) -> bool {
        self.taints || !card.keeps_claims_off()
    }

    /// The taints `card`'s devices carry under this policy.
    pub fn taints_of(&self, card: &CardOffering) -> Option<Vec<DeviceTaint>> {
        let taints: Vec<DeviceTaint> = card
            .taints
            .iter()
            .filter(|_| self.taints)
            .filter(|t| self.none_effect || t.effect != EFFECT_NONE)
            .cloned()
            .collect();
        (!taints.is_empty()).then_some(taints)
    }

    /// Whether MIG offers are published at all: they are only safe beside counters.
    pub fn offers_mig(&self) -> bool {
        self.mig_allowed && self.counters
    }

    /// The strategies that get a shared offer per card. Shared offers need counters too: only the
    /// card's counters keep a share apart from the exclusive, MIG and other-strategy offers.
    pub fn shared_strategies(&self) -> Vec<SharingStrategy> {
        let allowed = [
            (self.time_slicing_allowed, SharingStrategy::TimeSlicing),
            (self.mps_allowed, SharingStrategy::Mps),
        ];
        let possible = self.counters && self.sharing;
        allowed
            .into_iter()
            .filter(|(on, _)| *on && possible)
            .map(|(_, strategy)| strategy)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_explicit_false_forbids_mig() {
        let mig = |label| OfferPolicy::from_node_labels(label, None, None).mig_allowed;
        assert!(mig(None));
        assert!(mig(Some("true")));
        assert!(mig(Some("")));
        assert!(!mig(Some("false")));
    }

    #[test]
    fn mig_needs_counters() {
        let mut policy = OfferPolicy::from_node_labels(None, None, None);
        assert!(policy.offers_mig());
        policy.counters = false;
        assert!(!policy.offers_mig());
    }

    #[test]
    fn sharing_is_off_unless_a_label_says_true() {
        assert!(
            OfferPolicy::from_node_labels(None, None, None)
                .shared_strategies()
                .is_empty()
        );
        let odd = OfferPolicy::from_node_labels(None, Some("yes"), Some("True"));
        assert!(odd.shared_strategies().is_empty());
        let both = OfferPolicy::from_node_labels(Some("false"), Some("true"), Some("true"));
        assert_eq!(
            both.shared_strategies(),
            [SharingStrategy::TimeSlicing, SharingStrategy::Mps]
        );
    }

    #[test]
    fn shared_offers_need_counters_and_sharing_fields() {
        let both = OfferPolicy::from_node_labels(None, Some("true"), Some("true"));
        let no_counters = OfferPolicy {
            counters: false,
            ..both
        };
        assert!(no_counters.shared_strategies().is_empty());
        let no_sharing = OfferPolicy { sharing: false, ..both };
        assert!(no_sharing.shared_strategies().is_empty());
    }
}
