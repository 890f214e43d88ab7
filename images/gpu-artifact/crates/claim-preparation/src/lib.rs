//! The gpu-handler's answer to the kubelet. For each claim the kubelet names it reads the
//! ResourceClaim (the kubelet sends only namespace, name and UID), resolves our driver's devices
//! through the catalog of what this node publishes ([`resolve`]), reads the Pods the claim is
//! reserved for (their `gpu.deckhouse.io/vfio` annotation; RBAC `get` on `pods`), and runs the node's prepare
//! pipeline (`node-prepare`) on the blocking pool. A failure reaches the user as a Warning Event on
//! the claim and on every Pod reserved for it; the kubelet shows the error and retries.
//!
//! After every prepare or unprepare it wakes the handler's status loop: the card's MIG mode may
//! have changed, and the offers follow the status. Every call is counted and timed, with a bounded
//! failure reason, and the checkpoint it leaves sets the prepared-claim metrics ([`ClaimMetrics`]).
//!
//! Where the API server defines it (1.36+), a prepared claim also gets KEP-5304 device metadata
//! ([`metadata`]): the PCI address KubeVirt reads, mounted into its containers.
//!
//! It never decides placement (the allocation says where) and never touches a card itself.

// Outside input never panics the product code: no unwrap, expect or indexing (tests may; clippy.toml).
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod events;
mod failure;
mod holdings;
mod metadata;
mod metrics;
mod node_claims;
mod node_side;
mod pods;
mod resolve;

pub use failure::FailureReason;
pub use holdings::card_holdings;
pub use metrics::{ClaimMetrics, NodePods};
pub use node_claims::{NodeClaims, NodeClaimsLinks};
pub use node_side::{
    CHECKPOINT_CORRUPT, DCGM_PAUSED_FOR_MIG, DCGM_PAUSED_LABEL, FOREIGN_MIG_INSTANCES, MIG_MODE_CHANGE_PENDING,
    MPS_DAEMON_RESTARTED,
};
pub use pods::{VFIO_ANNOTATION, asks_for_vfio};
pub use resolve::{ResolveError, resolve_devices};
