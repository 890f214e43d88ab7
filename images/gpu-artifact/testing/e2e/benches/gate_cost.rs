//! `make bench`: what the allocation gate costs a Pod's start (issue 31, "Measure"), through the
//! real scheduler and the real gpu-dra-controller process. 100 Pods, each with a claim from a
//! template of one whole card, are created one after another (the next once the last is bound) on
//! a node of 100 free cards, ungated (the scheduler alone: the baseline); then the same 100 gated
//! on a twin node. It prints creation-to-binding p50 and p99 of both, from the same run. A Pod's
//! binding time is when a Pod watch first shows its node name, its creation time just before the
//! create call.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use kube::api::PostParams;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::AgentWorkspace;
use support::dra_controller_run::start_dra_controller;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

const PODS: usize = 100;
const GATE: &str = "gpu.deckhouse.io/allocation";

type Bound = Arc<Mutex<HashMap<String, Instant>>>;

/// Records when each Pod of the namespace is first seen bound.
fn watch_bindings(ns: &TestNamespace) -> Bound {
    let bound = Bound::default();
    let record = bound.clone();
    let stream = watcher(ns.api::<Pod>(), watcher::Config::default()).for_each(move |event| {
        if let Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) = event
            && pod.spec.as_ref().is_some_and(|s| s.node_name.is_some())
        {
            record
                .lock()
                .unwrap()
                .entry(pod.name_any())
                .or_insert_with(Instant::now);
        }
        futures::future::ready(())
    });
    tokio::spawn(stream);
    bound
}

async fn node_of_cards(ns: &TestNamespace, run: &str) -> ReadyNode {
    let node = ReadyNode::register(ns, run, BTreeMap::new()).await.unwrap();
    let devices: Vec<_> = (0..PODS)
        .map(|i| device(&format!("gpu{i}"), "Physical", None))
        .collect();
    let slices = Api::<ResourceSlice>::all(ns.client());
    create(&slices, &slice(ns, run, node.name(), 1, json!({"devices": devices}))).await;
    node
}

/// Creation to binding of each of `PODS` Pods on `node`, one after another.
async fn run(ns: &TestNamespace, node: &ReadyNode, template: &str, gated: bool, bound: &Bound) -> Vec<Duration> {
    let pods = ns.api::<Pod>();
    let mut waits = vec![];
    for i in 0..PODS {
        let name = format!("{}-{i}", node.name());
        let mut extra = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]});
        if gated {
            extra["schedulingGates"] = json!([{"name": GATE}]);
        }
        let spec = pod(&name, node.name(), json!({"claims": [{"name": "gpu"}]}), extra);
        let created = Instant::now();
        pods.create(&PostParams::default(), &spec).await.unwrap();
        let at = wait_until(&format!("{name} bound"), Duration::from_secs(60), || async {
            Ok(match bound.lock().unwrap().get(&name) {
                Some(at) => Progress::Done(*at),
                None => Progress::Pending("not yet".into()),
            })
        })
        .await
        .unwrap();
        waits.push(at.duration_since(created));
    }
    waits
}

fn at(waits: &[Duration], p: f64) -> Duration {
    let mut sorted = waits.to_vec();
    sorted.sort();
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let ns = TestNamespace::create("bench-gate").await.unwrap();
    let minor = ns.cluster().server_minor().await.unwrap();
    let class = create(
        &Api::<DeviceClass>::all(ns.client()),
        &device_type_class(&ns, "physical", "Physical"),
    )
    .await
    .name_any();
    let template: ResourceClaimTemplate = serde_json::from_value(json!({"metadata": {"name": "one-card"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class}}]}}}}))
    .unwrap();
    create(&ns.api::<ResourceClaimTemplate>(), &template).await;
    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;
    let bound = watch_bindings(&ns);
    let ungated_node = node_of_cards(&ns, "ungated").await;
    let ungated = run(&ns, &ungated_node, "one-card", false, &bound).await;
    let gated_node = node_of_cards(&ns, "gated").await;
    let gated = run(&ns, &gated_node, "one-card", true, &bound).await;
    println!("gate cost (Kubernetes 1.{minor}; {PODS} Pods one after another, a whole card each)");
    for (what, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (base, with_gate) = (at(&ungated, p), at(&gated, p));
        println!(
            "  creation to binding {what}: ungated {base:>8.1?} (baseline), gated {with_gate:>8.1?}: +{:.1?}",
            with_gate.saturating_sub(base)
        );
    }
    drop(controller);
}
