//! gpu-dra-controller as a real process under the RBAC the chart renders for it, and what tests read
//! back from it: Events about one object (the Pending reasons and repairs it publishes), claims'
//! allocations, a PhysicalGPU's DriverReady condition as gpu-controller would report it, and the
//! note gpu-controller's lifter leaves on a Pod whose gate it lifted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gpu_api::PhysicalGPU;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::{ComponentProcess, Progress, TestNamespace, wait_until};

use super::components::{AgentWorkspace, dra_controller_rules, kubeconfig_with_lease, launch_controller};

/// Starts gpu-dra-controller under its RBAC (the chart's rules: `module_rbac` checks they are equal),
/// its Lease in `ns`, and waits until it is ready; returns the process and its health (and metrics)
/// port.
pub async fn start_dra_controller(ns: &TestNamespace, ws: &AgentWorkspace) -> (ComponentProcess, u16) {
    let kubeconfig = dra_controller_kubeconfig(ns, ws).await;
    start_dra_controller_with(ns, ws, &kubeconfig, &[]).await
}

/// A kubeconfig of gpu-dra-controller's service account under its RBAC, with its Lease in `ns`
/// (made once per namespace: a restarted controller reuses it).
pub async fn dra_controller_kubeconfig(ns: &TestNamespace, ws: &AgentWorkspace) -> PathBuf {
    kubeconfig_with_lease(ns, "gpu-dra-controller", dra_controller_rules(), ws.dir.path()).await
}

/// [`start_dra_controller`] with `kubeconfig` and `extra` environment (the chart's switches, such
/// as `PREEMPTION`); its log goes to `ws`.
pub async fn start_dra_controller_with(
    ns: &TestNamespace,
    ws: &AgentWorkspace,
    kubeconfig: &Path,
    extra: &[(&'static str, String)],
) -> (ComponentProcess, u16) {
    launch_controller(ns, ws, "gpu-dra-controller", kubeconfig, extra).await
}

/// Every Event of `ns` with `reason` about the object named `object`.
pub async fn events_about(ns: &TestNamespace, object: &str, reason: &str) -> kube::Result<Vec<Event>> {
    let params = ListParams::default().fields(&format!("regarding.name={object}"));
    let mut events = ns.api::<Event>().list(&params).await?.items;
    events.retain(|e| e.reason.as_deref() == Some(reason));
    Ok(events)
}

/// Waits up to `within` until the only Event with `reason` about `object` has a note that `wanted`
/// accepts, and returns that Event; on timeout it says what notes it saw last.
pub async fn event_whose_note(
    ns: &TestNamespace,
    object: &str,
    reason: &str,
    within: Duration,
    wanted: impl Fn(&str) -> bool,
) -> Event {
    wait_until(&format!("the {reason} Event on {object}"), within, || async {
        let events = events_about(ns, object, reason).await?;
        let notes: Vec<&str> = events.iter().map(|e| e.note.as_deref().unwrap_or("")).collect();
        Ok(match events.as_slice() {
            [one] if wanted(notes[0]) => Progress::Done(one.clone()),
            _ => Progress::Pending(format!("{} Events: {notes:?}", events.len())),
        })
    })
    .await
    .unwrap()
}

/// Waits until `wanted` accepts the stored claim `name`, which it returns; on timeout it says what
/// allocation the claim had last.
pub async fn claim_when(
    claims: &Api<ResourceClaim>,
    name: &str,
    what: &str,
    wanted: impl Fn(&ResourceClaim) -> bool,
) -> ResourceClaim {
    wait_until(&format!("claim {name} {what}"), Duration::from_secs(30), || async {
        let claim = claims.get(name).await?;
        Ok(if wanted(&claim) {
            Progress::Done(claim)
        } else {
            let allocation = claim.status.as_ref().and_then(|s| s.allocation.as_ref());
            Progress::Pending(format!("allocation {:?}", allocation.map(|a| &a.devices)))
        })
    })
    .await
    .unwrap()
}

/// Creates the PhysicalGPU `name` of `node` whose DriverReady condition is `ready` ("True"/"False"),
/// or sets that condition on it, as gpu-controller reports it.
pub async fn physical_gpu_driver_ready(ns: &TestNamespace, name: &str, node: &str, ready: &str) {
    let gpus = Api::<PhysicalGPU>::all(ns.client());
    if gpus.get_opt(name).await.unwrap().is_none() {
        let gpu: PhysicalGPU = serde_json::from_value(json!({
            "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
            "metadata": {"name": name, "labels": ns.owner_labels()}, "spec": {},
        }))
        .unwrap();
        gpus.create(&PostParams::default(), &gpu).await.unwrap();
    }
    let reason = if ready == "True" {
        "Validated"
    } else {
        "ValidatorNotReady"
    };
    let status = json!({"status": {
        "nodeInfo": {"nodeName": node},
        "conditions": [{"type": "DriverReady", "status": ready, "reason": reason,
            "message": "set by the test as gpu-controller would", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }});
    gpus.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
}

/// The note of the AllocationGateLifted Event gpu-controller's lifter publishes on the Pod `pod`
/// (one bound of 30 s and the lifter's period fit well inside its minute).
pub async fn lifted_note(ns: &TestNamespace, pod: &str) -> String {
    let selector = format!("regarding.name={pod}");
    wait_until(
        &format!("AllocationGateLifted Event of {pod}"),
        Duration::from_secs(60),
        || async {
            let list = ns.api::<Event>().list(&ListParams::default().fields(&selector)).await?;
            let lifted = list
                .items
                .iter()
                .find(|e| e.reason.as_deref() == Some("AllocationGateLifted"));
            Ok(match lifted.and_then(|e| e.note.clone()) {
                Some(note) => Progress::Done(note),
                None => Progress::Pending("no Event yet".to_owned()),
            })
        },
    )
    .await
    .unwrap()
}

/// Creates `claim` and a Pod with our gate, not pinned to a node, that waits for it
/// (`<claim>-user`): a claim no Pod waits for is not the controller's to allocate.
pub async fn gated_pod_waiting_for(ns: &TestNamespace, claim: ResourceClaim) {
    let name = claim.metadata.name.clone().expect("a named claim");
    super::create(&ns.api::<ResourceClaim>(), &claim).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                      "schedulingGates": [{"name": claim_allocation::selection::SCHEDULING_GATE}]});
    let mut user = super::pod(
        &format!("{name}-user"),
        "any",
        json!({"claims": [{"name": "gpu"}]}),
        uses,
    );
    user.spec.as_mut().expect("a Pod spec").node_selector = None;
    super::create(&ns.api::<k8s_openapi::api::core::v1::Pod>(), &user).await;
}
