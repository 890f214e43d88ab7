//! The scheduler's allocator, run in-process by the Go harness's benchmark mode at one release:
//! the requests for one inventory and claim stream, Go's timings read back, and our allocations
//! replayed under Go, each pinned to our devices on our node over the state of our earlier ones.

use std::time::Duration;

use allocator_workloads::{device_set, pinned_claim};
use k8s_openapi::api::resource::v1::AllocationResult;
use serde_json::{Value, json};

use crate::engine_run::{EngineRun, NodeOrder, Placements};
use crate::workload::{ClaimStream, Inventory};

pub fn load(inventory: &Inventory) -> Value {
    json!({"load": {"slices": inventory.slices_json, "classes": inventory.classes_json, "nodes": inventory.nodes_json}})
}

pub fn bench(stream: &ClaimStream, order: NodeOrder, until_first_failure: bool) -> Value {
    json!({"bench": {"claims": stream.json, "nodeOrder": order.as_str(), "untilFirstFailure": until_first_failure}})
}

pub fn replay(stream: &ClaimStream, ours: &Placements) -> Value {
    let steps: Vec<Value> = ours
        .iter()
        .map(|(i, node, result)| {
            json!({"node": node, "claim": pinned_claim(&stream.json[*i], result), "allocation": result})
        })
        .collect();
    json!({"replay": {"steps": steps}})
}

/// Go's answer to `bench`.
pub fn engine_run(answer: &Value) -> EngineRun {
    if let Some(error) = answer.get("error") {
        panic!("the Go allocator failed: {error}");
    }
    let nanos = |v: &Value| Duration::from_nanos(v.as_u64().expect("nanoseconds"));
    EngineRun {
        latencies: answer["latenciesNs"]
            .as_array()
            .expect("latencies")
            .iter()
            .map(nanos)
            .collect(),
        wall: nanos(&answer["wallNs"]),
        placed_on: answer["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n.as_str().filter(|n| !n.is_empty()).map(str::to_owned))
            .collect(),
    }
}

/// Checks Go's answer to `replay`: every allocation of ours accepted with the same devices and
/// consumed capacity. Returns how many were checked; panics on the first one Go rejects.
pub fn check_replay(version: &str, stream: &ClaimStream, ours: &Placements, answer: &Value) -> usize {
    let answers = answer["answers"].as_array().expect("answers");
    assert_eq!(answers.len(), ours.len(), "one replay answer per allocation");
    for ((i, node, result), go) in ours.iter().zip(answers) {
        let claim = &stream.json[*i]["metadata"]["name"];
        let Some(accepted) = go.get("allocation") else {
            panic!("Go {version} rejects our allocation of claim {claim} on {node}: {go}\nours: {result:?}");
        };
        let accepted: AllocationResult = serde_json::from_value(accepted.clone()).expect("Go's allocation");
        assert_eq!(
            device_set(&accepted),
            device_set(result),
            "Go {version} allocates claim {claim}, pinned to our devices, differently"
        );
    }
    ours.len()
}
