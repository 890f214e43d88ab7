//! Device counts of a DeviceClass, for `GPUClass.status.devices` and the class dashboards: how many
//! devices of the class the nodes publish now, how many claims hold through the class, how many a
//! new claim could get. Built from ResourceSlices and ResourceClaims ([`DeviceUsageIndex`]), the
//! class's selectors evaluated by `dra-cel`, the CEL environment the allocator uses.
//!
//! Counts, not allocation: it never decides where a claim goes, and a "free" device is free for a
//! claim of the default size (a share of a shared device with room left counts as free).
//!
//! This crate must never do I/O.

mod index;
mod usage;

pub use index::DeviceUsageIndex;
pub use usage::ClassUsage;
