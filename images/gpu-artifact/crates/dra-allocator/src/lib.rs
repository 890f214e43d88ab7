//! The allocation engine of the gpu module: ResourceSlices, DeviceClasses and claims in,
//! `AllocationResult`s shaped as the kube-scheduler writes them out. Same semantics as the
//! scheduler's structured allocator (CEL selectors, counters in the 1.34 and 1.35+ slice layouts,
//! consumable capacity with request policies and `shareID`, `ExactCount`/`All`,
//! `firstAvailable`, `matchAttribute`/`distinctAttribute`, admin access, taints of slices and of
//! admin DeviceTaintRules, node selection),
//! plus the module's safety invariants and best fit instead of the first solution: fewest memory
//! slices, least memory, and a request of several devices as close together as the node allows
//! (one NVLink domain, PCIe root, NUMA node: `topology`).
//!
//! It follows the cluster incrementally: slices, classes and allocated claims are applied and
//! removed one by one as a watch reports them, and each change costs in proportion to what it
//! touches (a pool, the nodes it reaches, a claim's devices), never a rebuild of the whole
//! inventory. Devices are held compactly (see `intern`, `device`): a thousand 8-GPU nodes with
//! every MIG placement offered are about 200,000 devices.
//!
//! It must never do I/O, hold Kubernetes clients or decide when to allocate: the controller does
//! that and calls `Allocator::allocate`, then `Allocator::commit_claim` once the status is written.
//!
//! Deliberate differences from the scheduler: counters of a multi-allocatable device are charged
//! once however many shares it has, also across scheduling cycles (the 1.36.2 fix); devices with
//! binding conditions are never picked. A claim allocated without a node (the scheduler never
//! does that) is tried per node and per node selector of the inventory; node-selector devices
//! join a node only when its name proves the selector matches, since labels are unknown.
//!
//! Invalid pools (a device name repeated across a pool's slices) are never allocated from, on any
//! release, and are reported by `Allocator::ignored_pools`: 1.34's allocator fails the whole
//! attempt once its search reaches such a pool, 1.37's skips it; we always skip it.

mod allocate;
mod allocator;
mod audit;
mod best_fit;
mod candidates;
mod capacity;
mod constraint;
mod device;
mod error;
mod explain;
mod fast_hash;
mod grouped_search;
mod holdings;
mod intern;
mod inventory;
mod memo;
mod node_selection;
mod pool;
mod reach;
mod release_probe;
mod request;
mod result;
mod scope;
mod search;
mod selector_answers;
mod selector_parts;
mod slice_record;
mod state;
mod taint_rule_hits;
mod taint_rules;
mod taints;
mod topology;
mod usage;

pub use allocator::{Allocator, claim_id};
pub use audit::InvariantViolation;
pub use error::AllocationError;
pub use explain::{Explanation, NodeExplanation, RequestProblem};
pub use inventory::{GPU_DRIVER, IgnoredPool, IgnoredSlice};
pub use request::ALLOCATION_RESULTS_MAX_SIZE;
pub use taint_rules::{TaintRule, TaintRuleSelector};
pub use taints::{TaintFields, TolerationFields, tolerates_taint};
