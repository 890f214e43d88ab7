//! What a GPUClass means, as plain data: the DeviceClass rendered from it ([`render`]), the problems
//! the controller finds in it (its CEL selectors checked by the DRA environment of the cluster's
//! release, as the API server will check them), who owns the DeviceClass of its name and its
//! extended resource name ([`ownership`]), and its `Ready` condition ([`readiness`]).
//!
//! The selectors are Kubernetes CEL over our devices' attributes (ARCHITECTURE.md section 4):
//! `deviceType`, `migProfile`, `sharing`, `vendor`, `device`, `ccMajor`/`ccMinor`, `baremetal`,
//! `physicalGPU` and the capacity `memory`. PhysicalGPU labels the devices carry as attributes are
//! compared as attributes; other labels are resolved to the PhysicalGPUs carrying them.
//!
//! This crate must never do I/O: the controller (`gpu-class-controller`) reads the cluster, calls
//! these functions and writes what they return.

mod label_selection;
pub mod ownership;
pub mod readiness;
mod render;
mod selectors;
mod validation;

pub use label_selection::{LabelSelection, select};
pub use render::{GPU_CLASS_LABEL, Rendered, render};
