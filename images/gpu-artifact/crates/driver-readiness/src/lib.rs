//! `DriverReady` on every PhysicalGPU, from the driver-validator Pod on the card's node:
//! Unknown while there is none, True when it is Ready, False with the Pod's reason and message
//! otherwise. [`decision`] is the pure rule; [`controller`] watches PhysicalGPUs and validator Pods
//! and writes only the DriverReady condition, only when it changes, only while leading.
//!
//! It never touches `HardwareHealthy` (the node's handler owns it) nor anything on the nodes.
//!
//! [`inventory_metrics`] exports gpu-controller's `gpu_physicalgpu_*` metrics: every PhysicalGPU
//! with its conditions, read-only, on every replica.

pub mod controller;
pub mod decision;
pub mod inventory_metrics;

/// Field manager of the DriverReady condition.
pub const FIELD_MANAGER: &str = "gpu-controller";
/// The condition type this crate owns.
pub const CONDITION: &str = "DriverReady";
