//! The node side of `NodePrepareResources` / `NodeUnprepareResources`
//! (architecture section 6): a fixed pipeline of small steps, each with an
//! undo, that turns a claim's allocated devices into real devices on the
//! host and a per-claim CDI spec, under a node lock, recorded in a versioned,
//! checksummed checkpoint. [`NodePreparer::reconcile`] runs at start and
//! removes whatever a crash left behind.
//!
//! What a device becomes:
//! - a whole card: MIG off, the card in the container;
//! - a MIG device: MIG on, a GPU instance at the allocated placement and its
//!   compute instance (through the vendor port);
//! - a share (`SharedPhysical`): every share of a card uses the card's active
//!   strategy and parameters ([`CardSharing`], recorded per share in the
//!   checkpoint). TimeSlicing: the first share runs
//!   `<nvidia_smi> compute-policy -i <uuid> --set-timeslice <0..3>`, the last
//!   one to leave sets 0 (Default) again. MPS: one control daemon per card
//!   (`<mps_control> -d`, stopped with `quit`; pipe and log directories
//!   `<plugin_dir>/mps/<pci address>/{pipe,log}`; supervised: started again
//!   when it dies), and each container gets
//!   `CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps` (the card's pipe directory,
//!   never its log directory) and `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` (the
//!   config's `defaultActiveThreadPercentage`, else the share's sharePercent); a share that
//!   asked for `memory` also gets `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` for exactly that much, one
//!   variable for all the claim's MPS shares (`mps_memory_limit`);
//! - a card for a virtual machine (a `VfioDeviceConfig`, or a Pod annotated
//!   `gpu.deckhouse.io/vfio: "true"`; exclusive whole cards on bare metal
//!   only, idle cards only): the card and every other function of its IOMMU
//!   group move to vfio-pci (their drivers recorded first, given back on
//!   unprepare), the group must be viable, and the container gets
//!   `/dev/vfio/<group>`, `/dev/vfio/vfio`, `NVIDIA_VISIBLE_DEVICES=void` and
//!   the QEMU hook payload.
//!
//! - a result with `adminAccess` (monitoring, maintenance): the card as it is, beside the claims
//!   that hold it: no exclusivity check, nothing made or switched for it (a MIG offer gives the
//!   parent card, whose partition is not made; VFIO is refused), and it holds nothing, so it
//!   blocks no other claim and its unprepare removes only its CDI spec and checkpoint entry.
//!
//! The QEMU hook payload of a VFIO claim is the JSON file
//! `<plugin_dir>/vfio/<claimUID>.json` on the host, mounted read-only at
//! `/var/run/gpu.deckhouse.io/vfio/<claimUID>.json`
//! ([`VFIO_PAYLOAD_CONTAINER_DIR`]) in every container of the claim:
//!
//! ```json
//! {
//!   "claim": {"namespace": "vms", "name": "vm-gpu", "uid": "<claim uid>"},
//!   "pods": [{"namespace": "vms", "name": "virt-launcher-vm-0", "uid": "<pod uid>"}],
//!   "devices": [{
//!     "request": "gpu", "device": "gpu0",
//!     "pciAddress": "0000:01:00.0", "iommuGroup": 13,
//!     "vendorId": "10de", "deviceId": "20b7",
//!     "functions": ["0000:01:00.0"]
//!   }]
//! }
//! ```
//!
//! `pods` are the Pods of the claim's `status.reservedFor` that exist; ids
//! are four lower-case hex digits; `functions` are every function of the
//! group now on vfio-pci.
//!
//! Everything is blocking and every host path lives under
//! [`NodePrepareConfig::host_root`]. This crate must never talk to the
//! Kubernetes API (the caller resolves claims and Pods) nor change a card's
//! mode, sharing or driver without a claim asking for it (invariant 4).

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod atomic_file;
mod bounded_vendor;
mod card_mode;
mod cdi_spec;
mod checkpoint;
mod checks;
mod config;
mod device_plan;
mod driver_files;
mod driver_proc;
mod error;
mod fault_point;
mod host_tool;
mod mps_daemon;
mod mps_memory_limit;
mod mps_namespace;
mod mps_shm;
mod mps_static_pod;
mod mps_static_pods;
mod node_lock;
mod preparer;
mod rebooted;
mod reconcile;
mod request;
mod steps;
mod teardown;
#[cfg(test)]
mod test_node;
mod time_slice;
mod vfio_passthrough;
// The unit tests share the integration tests' support module, which names this crate by its name.
#[cfg(test)]
extern crate self as node_prepare;

pub use cdi_spec::VFIO_PAYLOAD_CONTAINER_DIR;
pub use checkpoint::{
    CardSharing, CheckpointClaim, CheckpointDevice, ClaimState, MigInstanceRecord, VfioFunctionRecord, VfioRecord,
};
pub use config::{CDI_KIND, MpsStaticPods, NodePrepareConfig};
pub use driver_files::DriverFiles;
pub use error::PrepareError;
pub use fault_point::{FAULT_POINT_ENV, FAULT_REACHED_ENV, fault_points};
pub use mps_namespace::{MPS_NAMESPACE_COMMAND, exec_in_mps_namespace};
pub use preparer::NodePreparer;
pub use reconcile::ReconcileReport;
pub use request::{AllocatedDevice, PrepareRequest, ReservedPod};
