//! The gpu-handler's status work: what the vendor library says about this node's cards, written
//! into their PhysicalGPUs. In parts:
//! - [`nvidia_status`] and [`compute_types`]: pure mappings from the vendor port's
//!   [`gpu_vendor::GpuInventory`] to `status.capabilities` and `status.currentState.nvidia`, by the
//!   spec's filling rules (a field the library does not report stays absent; no `mig` block on a
//!   card without MIG);
//! - [`health`]: the `HardwareHealthy` rule over the health model's judgement (crate `gpu-health`);
//! - [`health_tracker`] and [`health_pass`]: the model fed with the monitor's events and the cards'
//!   readings on every pass, its ledger kept in a file, its metrics ([`health_metrics`]) and Events;
//! - [`desired`]: what the handler wants in one PhysicalGPU's status, a pure function of the stored
//!   object and the vendor view;
//! - [`writer`]: server-side apply of only the handler's fields, and only when they differ;
//! - [`vendor_link`]: loading the vendor library with backoff, reading cards, the health-monitor
//!   thread;
//! - [`offer_feed`]: which cards may be offered through DRA, with their health taints, shared with
//!   the publisher;
//! - [`handler`]: the event loop (watch on this node's PhysicalGPUs, health events, library
//!   retries, a local NVML re-read; writes only on differences).
//!
//! It never writes what other components own (PCI and node facts, driverType, DriverReady), never
//! changes a card (MIG mode, instances), and never crashes for want of the vendor library: that is
//! reported as `HardwareHealthy=Unknown` with reason `NVMLUnavailable`.

pub mod compute_types;
pub mod config;
pub mod desired;
pub mod handler;
pub mod health;
pub mod health_metrics;
pub mod health_pass;
pub mod health_tracker;
pub mod nvidia_status;
pub mod offer_feed;
#[cfg(test)]
mod test_gpus;
pub mod vendor_link;
pub mod writer;

/// Field manager of everything the handler writes.
pub const FIELD_MANAGER: &str = "gpu-handler";
/// The condition the handler owns.
pub const HARDWARE_HEALTHY: &str = "HardwareHealthy";
/// The condition gpu-controller owns (crate `driver-readiness`); capabilities need it True.
pub const DRIVER_READY: &str = "DriverReady";
