//! Our engine over one case, as the controller runs it: one allocator over the inventory and the
//! allocated claims, every claim of the stream allocated without a node, every result committed
//! and added to the allocated claims the next step (and Go) sees.

use allocator_workloads::unpinned;
use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

use crate::case::Case;

pub fn from<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("generated object deserialises")
}

/// One claim of the stream: what ours answered, and how many allocated claims it saw.
pub struct Step {
    pub claim: Value,
    pub allocated_before: usize,
    pub outcome: Result<Option<AllocationResult>, String>,
}

pub struct Stream {
    /// The case's allocated claims, then each claim ours allocated, in order.
    pub allocated: Vec<Value>,
    /// Ends early at the first claim ours returned an error for.
    pub steps: Vec<Step>,
}

pub fn run(case: &Case, classes: &[Value]) -> Stream {
    // As published: Go alone needs the pinning attribute, to judge ours.
    let slices: Vec<ResourceSlice> = case.slices().into_iter().map(|s| from(&unpinned(s))).collect();
    let classes: Vec<DeviceClass> = classes.iter().map(from).collect();
    let preallocated: Vec<ResourceClaim> = case.allocated.iter().map(from).collect();
    let mut allocator = Allocator::new(&slices, &classes, &preallocated);
    allocator.set_taint_rules(crate::taint_rules::ours(case.version, &case.taint_rules));
    let mut allocated = case.allocated.clone();
    let mut steps = Vec::new();
    for claim_json in &case.claims {
        let claim: ResourceClaim = from(claim_json);
        let outcome = allocator.allocate(&claim, None).map_err(|e| e.to_string());
        let allocated_before = allocated.len();
        let stop = outcome.is_err();
        if let Ok(Some(result)) = &outcome {
            allocator.commit(result);
            let mut done = claim_json.clone();
            done["status"] = json!({"allocation": serde_json::to_value(result).expect("result serialises")});
            allocated.push(done);
        }
        steps.push(Step {
            claim: claim_json.clone(),
            allocated_before,
            outcome,
        });
        if stop {
            break;
        }
    }
    Stream { allocated, steps }
}

/// The case with every claim before the `at`-th turned into an allocated claim (with the result
/// ours gave it) and only the `at`-th left in the stream: the same inputs for that claim, but
/// the earlier allocations can now be dropped one by one.
pub fn frozen(case: &Case, classes: &[Value], at: usize) -> Case {
    let stream = run(case, classes);
    let mut next = case.clone();
    next.allocated = stream.allocated[..stream.steps[at].allocated_before].to_vec();
    next.claims = vec![case.claims[at].clone()];
    next
}
