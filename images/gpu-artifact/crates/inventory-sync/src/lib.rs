//! The node agent's work, in three parts:
//! - [`desired`]: a pure function from what the host shows to the PhysicalGPU objects and node labels
//!   that should exist;
//! - [`writer`]: brings the API server to that state with server-side apply, writing only what
//!   differs and never touching a PhysicalGPU that belongs to another node;
//! - [`agent`]: the event loop (one sync at start, then kernel uevents and watch events, bursts
//!   coalesced, no polling).
//!
//! It never talks to NVML, allocates, or publishes ResourceSlices. Its [`metrics`] count the GPUs
//! it keeps and the syncs that failed.

pub mod agent;
pub mod config;
pub mod desired;
pub mod metrics;
pub mod writer;

/// Field manager of everything the node agent writes.
pub const FIELD_MANAGER: &str = "gpu-node-agent";
