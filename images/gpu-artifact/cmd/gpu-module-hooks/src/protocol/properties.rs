//! Bad input by the thousand for hook binding contexts (what addon-operator hands `hook run`): any
//! JSON is read as snapshots or refused with a reason, and the bootstrap hook turns any snapshot
//! into its own Node label and Events, never a panic.

use property_runs::proptest;
use property_runs::proptest::prelude::*;
use property_runs::{check, ensure};
use serde_json::{Map, Value, json};

use super::HookInput;

const WORDS: &[&str] = &[
    "snapshots",
    "filterResult",
    "gpus",
    "physicalgpus",
    "nodes",
    "name",
    "cdi",
    "true",
    "node",
    "vendor",
    "driverReady",
    "True",
    "False",
    "10de",
    "binding",
    "type",
    "Synchronization",
    "objects",
    "{}",
    "",
];

fn json() -> impl Strategy<Value = Value> {
    let word = prop_oneof![3 => proptest::sample::select(WORDS).prop_map(str::to_owned), 1 => any::<String>()];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        word.clone().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 40, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::vec((word.clone(), inner), 0..5)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Contexts shaped like addon-operator's, with generated filter results.
fn contexts() -> impl Strategy<Value = Value> {
    let item = json().prop_map(|result| json!({"filterResult": result}));
    let binding = prop_oneof![
        Just("physicalgpus".to_owned()),
        Just("nodes".to_owned()),
        any::<String>()
    ];
    let context = proptest::collection::btree_map(binding, proptest::collection::vec(item, 0..4), 0..3)
        .prop_map(|snapshots| json!({"binding": "gpus", "snapshots": snapshots}));
    prop_oneof![
        3 => proptest::collection::vec(context, 0..3).prop_map(Value::Array),
        1 => json(),
    ]
}

#[test]
fn property_any_binding_context_is_read_or_refused_and_the_hook_keeps_to_its_label() {
    check(
        "hook binding contexts",
        file!(),
        (contexts(), json()),
        |(contexts, values)| match HookInput::from_parts(&contexts, values) {
            Err(error) => ensure(contexts.as_array().is_none() && !error.to_string().is_empty(), || {
                format!("refused an array: {error}")
            }),
            Ok(input) => {
                let output = crate::hooks::bootstrap_nodes_for_properties(&input);
                ensure(output.values_patch.is_empty(), || {
                    format!("node placement is no value: {:?}", output.values_patch)
                })?;
                for operation in &output.kubernetes_patch {
                    let labels = operation["mergePatch"]["metadata"]["labels"].as_object();
                    let own_label = operation["kind"] == "Node"
                        && labels.is_some_and(|l| l.keys().eq([gpu_api::labels::NODE_DRIVER_READY]));
                    let event = operation["object"]["kind"] == "Event";
                    ensure(own_label || event, || {
                        format!("the bootstrap hook writes only its Node label and Events, not {operation}")
                    })?;
                }
                Ok(())
            }
        },
    );
}
