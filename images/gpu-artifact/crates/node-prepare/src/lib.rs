//! The node side of `NodePrepareResources` / `NodeUnprepareResources`
//! (architecture section 6): a fixed pipeline of small steps, each with an
//! undo, that turns a claim's allocated devices into real devices on the
//! host (MIG instances through the vendor port) and a per-claim CDI spec,
//! under a node lock, recorded in a versioned, checksummed checkpoint.
//! [`NodePreparer::reconcile`] runs at start and removes whatever a crash
//! left behind.
//!
//! Everything is blocking and every host path lives under
//! [`NodePrepareConfig::host_root`]. This crate must never talk to the
//! Kubernetes API (the caller resolves claims) nor change a card's mode
//! without a claim asking for it (invariant 4).

mod atomic_file;
mod card_mode;
mod cdi_spec;
mod checkpoint;
mod checks;
mod config;
mod driver_proc;
mod error;
mod fault_point;
mod node_lock;
mod preparer;
mod rebooted;
mod reconcile;
mod request;
mod steps;
mod teardown;
#[cfg(test)]
mod test_node;

pub use checkpoint::{CheckpointClaim, CheckpointDevice, ClaimState, MigInstanceRecord};
pub use config::{CDI_KIND, NodePrepareConfig};
pub use error::PrepareError;
pub use fault_point::FAULT_POINT_ENV;
pub use preparer::NodePreparer;
pub use reconcile::ReconcileReport;
pub use request::{AllocatedDevice, PrepareRequest};
