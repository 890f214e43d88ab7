//! The pure DRA core of publication: a node's eligible cards become the ResourceSlices of its pool
//! `gpus/<node>` and the catalog of what each published device name means.
//!
//! A card that supports MIG is offered at once as the whole card and as every MIG placement; where
//! the node's labels enable TimeSlicing or MPS, also as one shared offer per strategy
//! (`allowMultipleAllocations`, capacity `sharePercent`). The card's counter set (`pgpu-<pci>`:
//! memory, memory slices, engines) makes those offers mutually exclusive for the scheduler. The slices follow the layout of the server's version (1.34: counters
//! beside their devices; 1.35+: separate counter and device slices) and are checked against the API
//! limits before anyone sends them. When the server drops counters (gate off), the fallback is whole
//! cards only, without counter fields; when it drops the sharing fields, the fallback has no shared
//! offers. A card held by shares, or held whole or partitioned, publishes only the offers it can
//! still give ([`withheld`]): the 1.34 scheduler would otherwise allocate past committed shares.
//! An unhealthy card's offers carry its health taints (a MIG placement inherits its card's);
//! when the server drops taints, a card whose taints keep claims off is withheld instead.
//!
//! Cards joined by NVLink share a `gpu.deckhouse.io/nvlinkDomain` ([`nvlink_domains`]).
//!
//! This crate must never do I/O: it takes plain data and returns plain data, so every decision
//! about what is published is testable without a cluster.

mod attributes;
mod card;
mod catalog;
mod counters;
mod holdings;
mod layout;
mod limits;
mod names;
mod nvlink;
mod offers;
mod readback;

pub use attributes::SHARE_PERCENT;
pub use card::{
    ALLOW_MIG_LABEL, ALLOW_MPS_LABEL, ALLOW_TIMESLICING_LABEL, CardOffering, EFFECT_NO_EXECUTE, EFFECT_NO_SCHEDULE,
    EFFECT_NONE, OfferPolicy,
};
pub use catalog::{DEVICE_TYPE_MIG, DEVICE_TYPE_PHYSICAL, DeviceCatalog, OfferedDevice, VENDOR_NVIDIA};
pub use counters::{CounterValues, card_counters, fit_together, mig_consumption};
pub use holdings::{CardHolding, CardHoldings, withheld};
pub use layout::{Layout, PoolTarget, Publication, PublicationError, build_publication, build_publication_holding};
pub use limits::check_slice;
pub use names::{
    ATTRIBUTE_DOMAIN, counter_set_name, is_dns_label, is_dns_subdomain, mig_device_name, physical_device_name,
    pool_name, profile_label, shared_device_name, slice_name,
};
pub use nvlink::nvlink_domains;
pub use readback::{counters_dropped, sharing_dropped, taints_dropped};
