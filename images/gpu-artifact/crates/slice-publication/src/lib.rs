//! The gpu-handler's ResourceSlice publisher: keeps the node's pool `gpus/<node>` equal to what the
//! eligible cards and the Node's labels (`gpu.deckhouse.io/allow-mig`, `allow-timeslicing`,
//! `allow-mps`) call for, in the layout of the API server's version (decided by `dra-offers`).
//!
//! It writes only when the stored pool differs (a restart adopts an equal pool with zero writes),
//! always under a new pool generation, and deletes stale slices after the new generation is in
//! place. It reads back what the server kept: a server that dropped counters gets whole-GPU offers
//! only, an Event on the Node and `gpu_handler_offers_reduced{reason="CountersDropped"} 1`; a server
//! that dropped `allowMultipleAllocations` or capacity `requestPolicy` (gate `DRAConsumableCapacity`
//! off) gets no shared offers, an Event `SharingUnsupported` and `{reason="SharingDropped"} 1`.
//! Unhealthy cards are published with their health taints; a server that drops taints (probed with a
//! dry run before any taint reaches it) gets them withheld instead, an Event `DeviceTaintsUnsupported`,
//! `{reason="TaintsDropped"} 1`, and an Event `UnhealthyGPUsWithdrawn` naming the cards.
//!
//! It never decides what a card offers (that is `dra-offers`) and never touches a slice of another
//! driver or another node.

mod diff;
mod metrics;
mod node_watch;
mod publisher;
mod quantity;
mod run;
mod slice_watch;
mod store;
mod taint_support;

pub use diff::{Plan, plan};
pub use metrics::{COUNTERS_DROPPED, PublicationMetrics, ReducedLabels, SHARING_DROPPED, TAINTS_DROPPED, WriteLabels};
pub use publisher::{COUNTERS_UNSUPPORTED, PublisherConfig, SHARING_UNSUPPORTED};
pub use run::{PublishedSenders, run, run_with_holdings};
pub use taint_support::{TAINTS_UNSUPPORTED, UNHEALTHY_WITHDRAWN};
