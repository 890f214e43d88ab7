//! The Pods the admission webhook gated, as cleanup-on-disable finds them, and the patch that takes our
//! scheduling gate and its label off each.

use gpu_api::labels::{ALLOCATION_GATE_LABEL, SCHEDULING_GATE};
use kube::api::DynamicObject;
use serde_json::Value;

/// A Pod the webhook gated: where our gate is among its scheduling gates, and whether it has our label.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct GatedPod {
    pub namespace: String,
    pub name: String,
    pub gate_index: Option<usize>,
    pub labelled: bool,
}

impl GatedPod {
    /// The Pod's gate and label as listed; none when it has neither.
    pub fn of(pod: &DynamicObject) -> Option<Self> {
        let gates = pod.data.pointer("/spec/schedulingGates").and_then(Value::as_array);
        let gate_index = gates.and_then(|gates| gates.iter().position(|g| g["name"] == SCHEDULING_GATE));
        let labelled = pod
            .metadata
            .labels
            .as_ref()
            .is_some_and(|labels| labels.contains_key(ALLOCATION_GATE_LABEL));
        (gate_index.is_some() || labelled).then(|| Self {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            gate_index,
            labelled,
        })
    }

    /// The JSONPatch that removes our gate and our label (a Pod changed meanwhile fails it, so
    /// addon-operator runs the hook again on a fresh list).
    pub fn ungate_patch(&self) -> Value {
        gpu_api::gate_patch::ungate_patch(self.gate_index, self.labelled)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_is_ungated_only_of_what_is_ours() {
        let pod = |gates: Value, labels: Value| -> DynamicObject {
            serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "team", "labels": labels},
                "spec": {"schedulingGates": gates}}))
            .unwrap()
        };
        let queued = pod(json!([{"name": "example.com/quota"}]), json!({"app": "x"}));
        assert_eq!(GatedPod::of(&queued), None, "another actor's gate is not ours");
        let unlabelled = GatedPod::of(&pod(json!([{"name": SCHEDULING_GATE}]), json!({}))).unwrap();
        assert_eq!(
            unlabelled.ungate_patch().as_array().unwrap().len(),
            2,
            "no label to remove"
        );
        let lifted = GatedPod::of(&pod(json!([]), json!({ALLOCATION_GATE_LABEL: "true"}))).unwrap();
        assert_eq!(
            lifted.ungate_patch(),
            json!([{"op": "remove", "path": "/metadata/labels/gpu.deckhouse.io~1allocation-gate"}]),
            "a Pod whose gate is gone loses the label"
        );
    }
}
