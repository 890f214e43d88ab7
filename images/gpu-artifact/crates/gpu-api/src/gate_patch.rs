//! The JSONPatch that takes the allocation gate and its label off a Pod, shared by everyone who
//! lifts it by JSONPatch (gpu-controller's lifter, the hook cleanup-on-disable).

use serde_json::{Value, json};

use crate::labels::{ALLOCATION_GATE_LABEL, SCHEDULING_GATE};

/// Removes our gate where it was seen (guarded by a test that it is still there: the API server
/// only lets gates be removed, and a Pod changed meanwhile fails the whole patch, to be looked at
/// again) and the label [`ALLOCATION_GATE_LABEL`] when the Pod has it.
pub fn ungate_patch(gate_index: Option<usize>, labelled: bool) -> Value {
    let mut patch = Vec::new();
    if let Some(index) = gate_index {
        let path = format!("/spec/schedulingGates/{index}");
        patch.push(json!({"op": "test", "path": path, "value": {"name": SCHEDULING_GATE}}));
        patch.push(json!({"op": "remove", "path": path}));
    }
    if labelled {
        // RFC 6901: `/` in a key is written `~1`.
        let path = format!(
            "/metadata/labels/{}",
            ALLOCATION_GATE_LABEL.replace('~', "~0").replace('/', "~1")
        );
        patch.push(json!({"op": "remove", "path": path}));
    }
    Value::Array(patch)
}
