//! A mock `libnvidia-ml.so.1` for tests: NVML's C ABI (real signatures,
//! struct layouts from the nvml-wrapper-sys bindings, real return codes)
//! over a machine description file and a state file.
//!
//! - The machine description (`machines/*.yaml`, see [`machine`]) says which
//!   cards a node has, keyed by PCI bus id, with MIG profile tables and
//!   placements as NVIDIA publishes them for real hardware.
//! - The state ([`state`]) holds MIG mode, GPU/compute instances, fake
//!   processes, injected Xids and lost cards; it lives in a file under a lock
//!   so a restarted process sees what the previous one left and a test can
//!   change it while the code under test runs.
//! - [`test_support`] installs the library for a test and edits the state.
//!
//! Where real hardware and public mocks disagree, this mock follows real
//! hardware (mig-profiles.md). It must never be loaded outside tests, and it
//! models only what the gpu module relies on: anything else is absent (the
//! loader reports a missing symbol) rather than faked.

// The C exports dereference caller pointers and use `#[unsafe(no_mangle)]`;
// that unsafe code is confined to `ffi` (and one `dladdr` in `session`).
#![allow(unsafe_code)]

mod ffi;
mod handles;
pub mod machine;
mod mig_rules;
pub mod nvlink_links;
pub mod pci;
mod rc;
mod session;
pub mod state;
pub mod test_support;
