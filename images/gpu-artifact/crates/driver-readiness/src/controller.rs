//! Watches PhysicalGPUs and driver-validator Pods; while this replica leads, keeps each
//! PhysicalGPU's DriverReady condition equal to the verdict for its node's validator.

use std::sync::Arc;
use std::time::Duration;

use component_base::Shutdown;
use controller_plumbing::{LeaderElection, while_leading};
use futures::StreamExt;
use gpu_api::{PhysicalGPU, labels};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::decision::{Verdict, speaking_validator, verdict};
use crate::{CONDITION, FIELD_MANAGER};

/// Which Pods are driver validators.
#[derive(Clone, Debug)]
pub struct ValidatorSelector {
    pub namespace: String,
    pub labels: String,
}

struct Context {
    gpus: Api<PhysicalGPU>,
    validators: Api<Pod>,
    selector: ValidatorSelector,
}

/// Runs until shutdown: wins the Lease, reconciles while leading, steps back when it is lost.
pub async fn run(client: Client, selector: ValidatorSelector, election: Option<LeaderElection>, shutdown: Shutdown) {
    while_leading(election, shutdown, "reconciling DriverReady", || {
        reconcile_all(client.clone(), selector.clone())
    })
    .await;
}

async fn reconcile_all(client: Client, selector: ValidatorSelector) {
    let gpus = Api::<PhysicalGPU>::all(client.clone());
    let validators = Api::<Pod>::namespaced(client, &selector.namespace);
    let controller = Controller::new(gpus.clone(), watcher::Config::default());
    let store = controller.store();
    let pod_watch = watcher::Config::default().labels(&selector.labels);
    let context = Arc::new(Context {
        gpus,
        validators: validators.clone(),
        selector,
    });
    controller
        .watches(validators, pod_watch, move |pod: Pod| {
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            store
                .state()
                .iter()
                .filter(|gpu| node.is_some() && node_of(gpu) == node)
                .map(|gpu| ObjectRef::from_obj(gpu.as_ref()))
                .collect::<Vec<_>>()
        })
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::warn!(%error, "DriverReady reconcile failed");
            }
        })
        .await;
}

fn node_of(gpu: &PhysicalGPU) -> Option<String> {
    gpu.labels()
        .get(labels::NODE)
        .cloned()
        .or_else(|| gpu.status.as_ref()?.node_info.as_ref().map(|n| n.node_name.clone()))
}

async fn reconcile(gpu: Arc<PhysicalGPU>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    let Some(node) = node_of(&gpu) else {
        return Ok(Action::await_change());
    };
    let params = ListParams::default()
        .labels(&ctx.selector.labels)
        .fields(&format!("spec.nodeName={node}"));
    let pods = ctx.validators.list(&params).await?;
    let want = verdict(speaking_validator(&pods.items));
    let have = gpu
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION));
    if have.is_some_and(|c| same(c, &want)) {
        return Ok(Action::await_change());
    }
    let transition = match have {
        Some(c) if c.status == want.status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let condition = Condition {
        type_: CONDITION.into(),
        status: want.status.into(),
        reason: want.reason.clone(),
        message: want.message.clone(),
        last_transition_time: transition,
        observed_generation: gpu.metadata.generation,
    };
    let patch = json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "PhysicalGPU",
        "metadata": {"name": gpu.name_any()},
        "status": {"conditions": [condition]},
    });
    ctx.gpus
        .patch_status(
            &gpu.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await?;
    tracing::info!(physicalgpu = %gpu.name_any(), status = want.status, reason = %want.reason, "DriverReady changed");
    Ok(Action::await_change())
}

fn same(have: &Condition, want: &Verdict) -> bool {
    have.status == want.status && have.reason == want.reason && have.message == want.message
}

fn error_policy(_gpu: Arc<PhysicalGPU>, _error: &kube::Error, _ctx: Arc<Context>) -> Action {
    Action::requeue(Duration::from_secs(5))
}
