//! gpu-dra-controller's work. The kube-scheduler allocates most claims itself; this controller
//! allocates only what the scheduler is not about to take ([`selection`]): the claims of Pods that
//! carry the scheduling gate `gpu.deckhouse.io/allocation` (it then removes the gate, and the
//! scheduler binds the Pod to the node of the allocation). A claim no Pod waits for is allocated by
//! nobody, as upstream does it. One engine, kept up to date from the watches ([`engine_feed`]) on a
//! thread of its own ([`engine_thread`]), serves every round ([`pass`]); results are written with
//! a resourceVersion precondition behind the leadership fence ([`claim_writes`], [`fencing`]): a
//! conflict means someone else allocated, and the claim is re-read, never overwritten. Every
//! allocated claim of our driver is audited against the safety invariants, whoever allocated it
//! ([`metrics`], Events); a device held twice is repaired ([`double_allocation`]); a claim that
//! fits nowhere is told why, node by node ([`pending_reason`]); a claim that gives its devices
//! back gets a `Released` Event ([`releases`]). GPU time per class and namespace is read from the
//! claim watch itself, on every replica ([`allocation_clock`]).
//!
//! It never touches nodes, and it is never needed for safety: the published counters are.

pub mod allocation_clock;
pub mod claim_store;
pub mod claim_writes;
pub mod controller;
pub mod double_allocation;
pub mod engine_feed;
pub mod engine_thread;
pub mod fencing;
pub mod lean_objects;
pub mod lean_pod;
pub mod metrics;
mod mps_tenancy;
pub mod node_facts;
pub mod node_fit;
pub mod node_room;
pub mod node_watch;
pub mod note_events;
pub mod pass;
mod pending_claims;
pub mod pending_notes;
pub mod pending_reason;
pub mod pod_nodes;
pub mod preemption;
pub mod preemption_search;
pub mod preemption_state;
pub mod releases;
pub mod round_schedule;
pub mod selection;
pub mod stored_claims;
pub mod taint_rule_watch;
#[cfg(test)]
mod test_objects;

/// Field manager and Event reporter of everything this controller writes.
pub const FIELD_MANAGER: &str = "gpu-dra-controller";
