//! The gpu module's API types and the names every component agrees on.
//!
//! `PhysicalGPU` is the inventory of one physical card: it appears and disappears with the PCI
//! device, and it has no desired state on purpose (the card's mode follows allocations, changed only
//! on the node in NodePrepareResources). Its status is written by three owners through server-side
//! apply, each with its own field manager: the node agent (PCI and node facts, driver binding,
//! labels), the handler (capabilities, NVIDIA state, `HardwareHealthy`) and the controller
//! (`DriverReady`).
//!
//! `GPUClass` is what an admin keeps: which GPUs a class means and how they are shared. gpu-controller
//! renders it into a DeviceClass of the same name and owns its status.

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

pub mod crd;
pub mod gate_patch;
mod gpu_class;
pub mod labels;
mod nvidia;
pub mod opaque_config;
mod physical_gpu;

pub use gpu_class::*;
pub use nvidia::*;
pub use physical_gpu::*;

/// The DRA driver name, and the API group of our resources.
pub const DRIVER_NAME: &str = "gpu.deckhouse.io";
