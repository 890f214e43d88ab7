//! GPUs asked for as extended resources (`resources.limits["gpu.deckhouse.io/<class>"]: 1`, the
//! spec's main way) on the real node with the chart's webhook installed: such a Pod is not gated
//! (the kube-scheduler makes its claim only while it binds it, docs/README.md "Best fit"), so it
//! starts at once, while a Pod of the same class through a claim template is gated and allocated by
//! gpu-dra-controller. And over the whole suite, no Pod waited for gpu-controller to lift a gate:
//! the audit log of the node's API server keeps every Event the module's components created, also
//! those of test namespaces deleted since; tools/test/run.sh runs this file once more after
//! `make demo`, whose `h100-job` asks for two H100s as an extended resource.

mod support;

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use serde_json::{Value, json};
use support::*;
use testbed::{Progress, wait_until};

const GATE: &str = "gpu.deckhouse.io/allocation";

fn gates(pod: &Pod) -> Vec<String> {
    let gates = pod.spec.iter().flat_map(|s| s.scheduling_gates.iter().flatten());
    gates.map(|g| g.name.clone()).collect()
}

/// The workload Pod asking for one GPU of `class` as an extended resource.
fn extended_resource_pod(name: &str, class: &str) -> Value {
    let mut pod = workload_pod(name, SHOW_GPUS, &[], &[]);
    pod["spec"]["containers"][0]["resources"] = json!({"limits": {format!("gpu.deckhouse.io/{class}"): "1"}});
    pod
}

#[tokio::test]
async fn an_extended_resource_pod_is_not_gated_and_runs_on_a_card_of_its_class() {
    let _cards = CARDS.lock().await;
    let (_, client) = node_with_example_classes().await;
    let ns = namespace(&client, "ext-res").await;
    let pods = Api::<Pod>::namespaced(client.clone(), &ns);

    // The webhook is live: the same class through a claim template gets the gate.
    apply(
        &client,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-h100", "namespace": &*ns},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "h100"}}]}}}}),
    )
    .await;
    create_pod(
        &client,
        &ns,
        &workload_pod("by-template", SHOW_GPUS, &[], &[("gpu", "one-h100")]),
    )
    .await;
    let by_template = pods.get("by-template").await.unwrap();
    assert!(
        gates(&by_template).contains(&GATE.to_owned()),
        "{:?}",
        gates(&by_template)
    );

    create_pod(&client, &ns, &extended_resource_pod("by-resource", "h100")).await;
    let by_resource = pods.get("by-resource").await.unwrap();
    assert_eq!(
        gates(&by_resource),
        Vec::<String>::new(),
        "the webhook left it to the scheduler"
    );

    let out = finish_run(&client, &ns, "by-resource").await;
    let pod = pods.get("by-resource").await.unwrap();
    let status = pod.status.and_then(|s| s.extended_resource_claim_status);
    let claim = status
        .expect("the scheduler's extended-resource claim")
        .resource_claim_name;
    let given = allocated_uuids(&client, &ns, &claim).await;
    assert_eq!(given.len(), 1, "{given:?}");
    let gpus = gpu_lines(&out);
    assert_eq!(gpus.len(), 1, "{out}");
    assert!(
        gpus[0].contains("H100") && gpus[0].contains(&given[0].1),
        "{gpus:?} {given:?}"
    );
    finish_run(&client, &ns, "by-template").await;
    delete_namespace(&client, &ns).await;
}

/// The reasons of the Events the module's components created, from the audit log (events at the
/// `Request` level: tools/testbed/cluster-up.sh).
fn module_event_reasons(audit: &str) -> Vec<(String, String)> {
    let created = audit.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok());
    let created = created.filter(|e| {
        e["verb"] == "create"
            && e["objectRef"]["resource"] == "events"
            && e["responseStatus"]["code"].as_u64().is_some_and(|c| c < 300)
            && e["user"]["username"]
                .as_str()
                .is_some_and(|u| u.starts_with("system:serviceaccount:d8-gpu:"))
    });
    let reason = |e: &Value| {
        let object = &e["requestObject"];
        let regarding = object.get("regarding").or_else(|| object.get("involvedObject"));
        let pod = regarding.map(|r| format!("{}/{}", r["namespace"], r["name"]));
        (
            object["reason"].as_str().unwrap_or("?").to_owned(),
            pod.unwrap_or_default(),
        )
    };
    created.map(|e| reason(&e)).collect()
}

#[tokio::test]
async fn no_allocation_gate_was_lifted_on_this_node() {
    let (node, _) = node().await;
    let audit = node.dir.join("cluster/logs/audit.log");
    // This file's other test makes gpu-dra-controller write an Allocated Event: the check below is
    // never made on a log that keeps no Event bodies.
    let reasons = wait_until("the module's Allocated Event in the audit log", POD_DONE, || {
        let audit = audit.clone();
        async move {
            let text = std::fs::read_to_string(&audit).map_err(|e| anyhow::anyhow!("{}: {e}", audit.display()))?;
            let reasons = module_event_reasons(&text);
            Ok(match reasons.iter().any(|(reason, _)| reason == "Allocated") {
                true => Progress::Done(reasons),
                false => Progress::Pending(format!("{reasons:?}")),
            })
        }
    })
    .await
    .unwrap();
    let lifted: Vec<_> = reasons.iter().filter(|(r, _)| r == "AllocationGateLifted").collect();
    assert!(lifted.is_empty(), "gates lifted by gpu-controller: {lifted:?}");
}
