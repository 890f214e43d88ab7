//! A churn of claims of mixed MIG sizes through the real scheduler: Pods arrive (each with one
//! claim from a template asking for a GPU device of at least 5, 10, 20 or 40 Gi, smaller ones more
//! often, of a class that both whole cards and MIG partitions satisfy) and depart, in an order
//! drawn from a seed, on one node of H100 cards offering the whole card and every MIG placement,
//! in the order gpu-handler publishes them. A run counts the Pods placed until the first one that cannot be: with the scheduler
//! alone (its allocator takes the first device that fits), or with gpu-dra-controller's best fit
//! (the Pods carry its scheduling gate, as admission gives them).
//!
//! One node keeps both runs deterministic: the scheduler breaks ties between equal nodes at random.

mod plan;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use allocator_workloads::{H100_SXM5_80GB, NodeShape, Rng, node_slices};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

pub use plan::{Step, churn_plan};

use crate::support::components::install_crds;
use crate::support::dra_controller_run::events_about;
use crate::support::{create, device_class, one_request_template, pod, scheduling_message};

pub const GATE: &str = "gpu.deckhouse.io/allocation";
/// The sizes a Pod asks for, by template: at least this many Gi of a MIG device.
pub const SIZES_GI: [u64; 4] = [5, 10, 20, 40];

/// A class of every exclusive GPU device of our driver, whole cards and MIG partitions alike: what a
/// user asking for "a GPU with at least N Gi" uses.
const ANY_GPU_CEL: &str = r#"device.driver == "gpu.deckhouse.io" && !device.allowMultipleAllocations"#;

/// Installs the module's CRDs, the any-GPU class and a template per size (`SIZES_GI`); returns the
/// templates' names by size.
pub async fn any_gpu_templates(ns: &TestNamespace) -> [String; 4] {
    install_crds(&ns.client()).await;
    let class = device_class(ns, "any-gpu", ANY_GPU_CEL, None);
    create(&Api::<DeviceClass>::all(ns.client()), &class).await;
    let class_name = class.metadata.name.clone().unwrap_or_default();
    let mut templates: [String; 4] = Default::default();
    for (template, gi) in templates.iter_mut().zip(SIZES_GI) {
        *template = format!("at-least-{gi}gi");
        let memory = format!(r#"device.capacity["gpu.deckhouse.io"].memory.compareTo(quantity("{gi}Gi")) >= 0"#);
        let exactly = json!({"deviceClassName": class_name, "selectors": [{"cel": {"expression": memory}}]});
        one_request_template(ns, template, exactly, None).await;
    }
    templates
}

/// The node of one run, its slices published.
pub struct ChurnNode {
    pub node: ReadyNode,
}

impl ChurnNode {
    pub async fn publish(ns: &TestNamespace, run: &str, cards: usize, split_layout: bool) -> ChurnNode {
        let node = ReadyNode::register(ns, run, BTreeMap::new()).await.unwrap();
        let shape = NodeShape {
            cards_min: cards,
            cards_spread: 1,
            models: &[&H100_SXM5_80GB],
            shared_offer_percent: 0,
            mig_offers_percent: 100,
            one_profile_per_size: false,
            taint_percent: 0,
            split_layout,
        };
        let slices = Api::<ResourceSlice>::all(ns.client());
        let published = node_slices(&mut Rng::new(1), node.name(), &shape);
        let count = published.len();
        for mut slice in published {
            slice["metadata"]["labels"] = json!(ns.owner_labels());
            // gpu-handler publishes devices sorted by name (dra-offers `layout`): the order the
            // scheduler tries them in.
            if let Some(devices) = slice["spec"]["devices"].as_array_mut() {
                devices.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
            }
            slice["spec"]["pool"]["resourceSliceCount"] = json!(count);
            let slice: ResourceSlice = serde_json::from_value(slice).unwrap();
            slices.create(&PostParams::default(), &slice).await.unwrap();
        }
        // A new Node carries the not-ready taint until the node lifecycle controller sees it Ready;
        // a Pod refused meanwhile would end the churn before it began.
        let nodes = Api::<Node>::all(ns.client());
        wait_until(
            &format!("node {} untainted", node.name()),
            Duration::from_secs(60),
            || async {
                let taints = nodes
                    .get(node.name())
                    .await?
                    .spec
                    .and_then(|s| s.taints)
                    .unwrap_or_default();
                Ok(if taints.is_empty() {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{taints:?}"))
                })
            },
        )
        .await
        .unwrap();
        ChurnNode { node }
    }
}

/// What a run placed: how many Pods were bound before the first that could not be, and the
/// device (`pool/device`) each bound Pod's claim got, in arrival order.
pub struct ChurnRun {
    pub placed: usize,
    pub devices: Vec<String>,
    pub failure: String,
    /// From each placed Pod's creation until the test saw it bound.
    pub waits: Vec<Duration>,
}

/// Runs `plan` on `node` until the first Pod that cannot be placed (or the plan's end), then deletes
/// what it left. `templates` maps a size to its ResourceClaimTemplate.
/// `context` is told when a Pod is neither placed nor refused in time (the controller's log).
pub async fn run(
    ns: &TestNamespace,
    node: &ChurnNode,
    templates: &[String; 4],
    gated: bool,
    plan: &[Step],
    context: &dyn Fn() -> String,
) -> ChurnRun {
    let pods = ns.api::<Pod>();
    let mut live: Vec<String> = vec![];
    let mut result = ChurnRun {
        placed: 0,
        devices: vec![],
        failure: "the plan ended".into(),
        waits: vec![],
    };
    for (i, step) in plan.iter().enumerate() {
        match *step {
            Step::Depart(index) => {
                let name = live.remove(index % live.len());
                depart(ns, &name).await;
            }
            Step::Arrive(size) => {
                let name = format!("{}-{i}", node.node.name());
                let mut extra =
                    json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": templates[size]}]});
                if gated {
                    extra["schedulingGates"] = json!([{"name": GATE}]);
                }
                let spec = pod(&name, node.node.name(), json!({"claims": [{"name": "gpu"}]}), extra);
                let created = Instant::now();
                pods.create(&PostParams::default(), &spec).await.unwrap();
                match placed(ns, &name, context).await {
                    Ok(device) => {
                        result.waits.push(created.elapsed());
                        result.placed += 1;
                        result.devices.push(device);
                        live.push(name);
                    }
                    Err(why) => {
                        result.failure = format!("{name} (at least {} Gi): {why}", SIZES_GI[size]);
                        live.push(name);
                        break;
                    }
                }
            }
        }
    }
    for name in live {
        depart(ns, &name).await;
    }
    result
}

/// The device the Pod's claim got once it is bound, or why it cannot be placed: the scheduler
/// found it unschedulable, or gpu-dra-controller told its claim that it fits nowhere.
async fn placed(ns: &TestNamespace, name: &str, context: &dyn Fn() -> String) -> Result<String, String> {
    let pods = ns.api::<Pod>();
    let claims = ns.api::<ResourceClaim>();
    wait_until(
        &format!("pod {name} placed or refused"),
        Duration::from_secs(90),
        || async {
            let pod = pods.get(name).await?;
            let claim_name = pod
                .status
                .as_ref()
                .and_then(|s| s.resource_claim_statuses.as_ref())
                .and_then(|s| s.first())
                .and_then(|s| s.resource_claim_name.clone());
            if pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
                let claim = claims.get(claim_name.as_deref().unwrap_or_default()).await?;
                let device = claim
                    .status
                    .and_then(|s| s.allocation)
                    .and_then(|a| a.devices)
                    .and_then(|d| {
                        d.results
                            .and_then(|r| r.first().map(|r| format!("{}/{}", r.pool, r.device)))
                    });
                return Ok(
                    device.map_or(Progress::Pending("bound, allocation not read yet".into()), |d| {
                        Progress::Done(Ok(d))
                    }),
                );
            }
            let scheduling = scheduling_message(&pod);
            if scheduling.starts_with("Unschedulable") {
                return Ok(Progress::Done(Err(scheduling)));
            }
            if let Some(claim) = claim_name
                && let Some(refused) = events_about(ns, &claim, "CannotAllocate").await?.first()
            {
                return Ok(Progress::Done(Err(refused.note.clone().unwrap_or_default())));
            }
            Ok(Progress::Pending(scheduling))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- context ---\n{}", context()))
}

/// Deletes the Pod at once (no kubelet runs it) and waits until its claim is gone, so the next
/// step sees the devices given back.
async fn depart(ns: &TestNamespace, name: &str) {
    let pods = ns.api::<Pod>();
    let claims = ns.api::<ResourceClaim>();
    let claim = pods
        .get(name)
        .await
        .unwrap()
        .status
        .and_then(|s| s.resource_claim_statuses)
        .and_then(|s| s.into_iter().next())
        .and_then(|s| s.resource_claim_name);
    pods.delete(name, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_until(
        &format!("pod {name} and its claim gone"),
        Duration::from_secs(60),
        || async {
            let pod_left = pods.get_opt(name).await?.is_some();
            let claim_left = match &claim {
                Some(c) => claims.get_opt(c).await?.is_some(),
                None => false,
            };
            Ok(if pod_left || claim_left {
                Progress::Pending(format!("pod left: {pod_left}, claim left: {claim_left}"))
            } else {
                Progress::Done(())
            })
        },
    )
    .await
    .unwrap();
}
