//! What the preemption test and bench share: a node of two A30s (each offered whole and as four
//! 1g.6gb partitions), gated Pods of a priority class, and the parts of a kubelet no process plays
//! on the test bed: a Pod reported Running (so PodDisruptionBudgets count it and the Eviction API
//! consults them), and a Pod an eviction marked for deletion removed once its containers stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::DeviceClass;
use k8s_openapi::api::resource::v1::ResourceClaim;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use testbed::{Progress, TestNamespace, wait_until};

use super::dra_controller_run::event_whose_note;
use super::{allocated_devices, create, device_type_class, one_request_template, publish_card, templated_pod};

/// Publishes two A30s on `node`: `gpuN` whole and `gpuN-mig-1g6gb-{0..3}`, one counter set each.
pub async fn publish_two_a30(ns: &TestNamespace, node: &str) {
    let mut counters = vec![];
    let mut devices = vec![];
    for card in 0..2 {
        let set = format!("pgpu-{card}");
        counters.push(json!({"name": set, "counters": {"memory": {"value": "24Gi"}}}));
        devices.push(super::device(&format!("gpu{card}"), "Physical", Some((&set, "24Gi"))));
        for slot in 0..4 {
            devices.push(super::device(
                &format!("gpu{card}-mig-1g6gb-{slot}"),
                "MIG",
                Some((&set, "6Gi")),
            ));
        }
    }
    publish_card(ns, node, json!(counters), json!(devices)).await;
}

/// Creates the classes of the A30s' partitions and whole cards and the ResourceClaimTemplates
/// `mig` and `whole` that request one of each.
pub async fn mig_and_whole_templates(ns: &TestNamespace) {
    let classes = Api::<DeviceClass>::all(ns.client());
    let mig = create(&classes, &device_type_class(ns, "mig", "MIG")).await.name_any();
    let whole = create(&classes, &device_type_class(ns, "whole", "Physical"))
        .await
        .name_any();
    one_request_template(ns, "mig", json!({"deviceClassName": mig}), None).await;
    one_request_template(ns, "whole", json!({"deviceClassName": whole}), None).await;
}

const GATE: &str = "gpu.deckhouse.io/allocation";
pub const WAIT: Duration = Duration::from_secs(90);

/// A gated Pod on `node` whose one claim comes from `template`, of `priority_class` if given.
pub fn gated(name: &str, node: &str, template: &str, priority_class: Option<&str>) -> Pod {
    let mut pod = templated_pod(name, node, template);
    let spec = pod.spec.as_mut().unwrap();
    spec.scheduling_gates = Some(vec![serde_json::from_value(json!({"name": GATE})).unwrap()]);
    spec.priority_class_name = priority_class.map(str::to_owned);
    pod
}

pub fn priority_class(ns: &TestNamespace, name: &str, value: i32, policy: &str) -> PriorityClass {
    serde_json::from_value(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": ns.unique(name), "labels": ns.owner_labels()},
        "value": value, "preemptionPolicy": policy}))
    .unwrap()
}

/// The card (`gpuN`) of the device `pod`'s claim holds, once it is allocated.
pub async fn card_of(ns: &TestNamespace, pod: &str) -> String {
    let pods = ns.api::<Pod>();
    let claims = ns.api::<ResourceClaim>();
    wait_until(&format!("{pod}'s claim allocated"), WAIT, || async {
        let statuses = pods.get(pod).await?.status.and_then(|s| s.resource_claim_statuses);
        let Some(name) = statuses.and_then(|s| s.first()?.resource_claim_name.clone()) else {
            return Ok(Progress::Pending("no claim yet".into()));
        };
        let claim = claims.get(&name).await?;
        Ok(match allocated_devices(&claim).first() {
            Some((_, device)) => Progress::Done(device.split('-').next().unwrap().to_owned()),
            None => Progress::Pending("unallocated".into()),
        })
    })
    .await
    .unwrap()
}

/// Fills `node` with eight priority-0 MIG Pods (`low-0`..`low-7`, four per card), each bound and
/// marked Running, started at `started(card)`; their names by card.
pub async fn mig_pods_on_every_slot(
    ns: &TestNamespace,
    node: &str,
    started: impl Fn(&str) -> &'static str,
) -> BTreeMap<String, BTreeSet<String>> {
    let pods = ns.api::<Pod>();
    let mut by_card: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..8 {
        let name = format!("low-{i}");
        create(&pods, &gated(&name, node, "mig", None)).await;
        super::bound_pod(ns, &name).await;
        let card = card_of(ns, &name).await;
        running(ns, &name, started(&card)).await;
        by_card.entry(card).or_default().insert(name);
    }
    by_card
}

/// Waits until `pod`'s `status.nominatedNodeName` is `node`.
pub async fn nominated(ns: &TestNamespace, pod: &str, node: &str) {
    let pods = ns.api::<Pod>();
    wait_until("the preemptor nominated", WAIT, || async {
        let status = pods.get(pod).await?.status;
        Ok(match status.and_then(|s| s.nominated_node_name) {
            Some(nominated) if nominated == node => Progress::Done(()),
            other => Progress::Pending(format!("nominatedNodeName {other:?}")),
        })
    })
    .await
    .unwrap();
}

/// Marks `pod` Running and Ready, started at `started` (what a kubelet reports), so a
/// PodDisruptionBudget counts it and the Eviction API consults the budget.
pub async fn running(ns: &TestNamespace, pod: &str, started: &str) {
    let status = json!({"status": {"phase": "Running", "startTime": started, "conditions": [
        {"type": "PodScheduled", "status": "True"},
        {"type": "Ready", "status": "True", "lastTransitionTime": started}]}});
    ns.api::<Pod>()
        .patch_status(pod, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// Pods of the namespace an eviction marked for deletion.
pub async fn terminating(ns: &TestNamespace) -> BTreeSet<String> {
    let pods = ns.api::<Pod>().list(&ListParams::default()).await.unwrap().items;
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .map(|p| p.name_any())
        .collect()
}

/// Waits until exactly `count` Pods are marked for deletion; returns them.
pub async fn evicted(ns: &TestNamespace, count: usize) -> BTreeSet<String> {
    wait_until(&format!("{count} Pods evicted"), WAIT, || async {
        let marked = terminating(ns).await;
        Ok(if marked.len() >= count {
            Progress::Done(marked)
        } else {
            Progress::Pending(format!("{marked:?}"))
        })
    })
    .await
    .unwrap()
}

/// What a kubelet does once the containers of a Pod marked for deletion stopped.
pub async fn kubelet_removes(ns: &TestNamespace, pods: &BTreeSet<String>) {
    for pod in pods {
        ns.api::<Pod>()
            .delete(pod, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
}

pub async fn one_event(ns: &TestNamespace, object: &str, reason: &str) -> String {
    let event = event_whose_note(ns, object, reason, WAIT, |_| true).await;
    event.note.unwrap_or_default()
}

/// The `gpu_dra_preemptions_total` lines of the controller's `/metrics` on `port` now.
pub fn preemption_lines(port: u16) -> anyhow::Result<Vec<String>> {
    let out = std::process::Command::new("curl")
        .args(["-fsS", "--max-time", "2", &format!("http://127.0.0.1:{port}/metrics")])
        .output()?;
    let body = String::from_utf8(out.stdout)?;
    Ok(body
        .lines()
        .filter(|l| l.starts_with("gpu_dra_preemptions_total"))
        .map(str::to_owned)
        .collect())
}

/// The `gpu_dra_preemptions_total` lines of the controller's `/metrics` on `port`, once
/// `evictions` preemptions evicted their victims.
pub async fn preemptions_counted(port: u16, evictions: u32) -> String {
    let done = format!(r#"{{outcome="evicted"}} {evictions}"#);
    wait_until(
        &format!("{evictions} preemptions counted in /metrics"),
        WAIT,
        || async {
            let lines = preemption_lines(port)?;
            Ok(if lines.iter().any(|l| l.ends_with(&done)) {
                Progress::Done(lines.join("\n"))
            } else {
                Progress::Pending(format!("{lines:?}"))
            })
        },
    )
    .await
    .unwrap()
}
