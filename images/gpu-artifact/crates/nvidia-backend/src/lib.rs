//! The NVIDIA implementation of the vendor port ([`gpu_vendor::VendorBackend`])
//! over NVML: nvml-wrapper for what it covers, nvml-wrapper-sys (module
//! `raw`, the only `unsafe` code) for MIG profile names, placements, GPU and
//! compute instances and Xid events with their MIG attribution, and row remapping for health
//! readings.
//!
//! NVML is loaded at run time from a configurable path (default
//! `libnvidia-ml.so.1` through the normal `dlopen` search). A missing library
//! or driver is an error value ([`gpu_vendor::VendorError::Unavailable`],
//! [`gpu_vendor::VendorError::DriverNotLoaded`]), never a panic.
//!
//! Profile names: NVML's profile info v2/v3 `name` is used with an optional
//! `MIG ` prefix stripped (the exact NVML string is unconfirmed,
//! mig-profiles.md section 7). Where only the v1 call answers (it has no
//! name; the versioned call needs MIG enabled), the name is derived from
//! the memory size the way NVIDIA's go-nvlib does.
//!
//! This crate must never decide policy (which card to partition, when a card
//! counts as free, which Xid makes a card unhealthy): it reports facts and
//! performs the requested change.

mod backend;
mod config;
mod errors;
mod health;
mod health_reading;
mod inventory;
mod mig_instances;
mod mig_profiles;
mod nvlink;
mod profile_name;
mod raw;

pub use backend::NvidiaBackend;
pub use config::{DEFAULT_LIBRARY, NvidiaBackendConfig};
pub use profile_name::{derive_profile_name, strip_vendor_prefix};
