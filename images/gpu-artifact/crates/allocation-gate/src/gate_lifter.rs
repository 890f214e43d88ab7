//! Fail open (issue 16 item 3): a Pod that waits behind the gate `gpu.deckhouse.io/allocation`
//! longer than a bound (default 30 s) has the gate lifted, so the kube-scheduler allocates it
//! first fit, with a log line and a Warning Event on the Pod saying why. The wait counts from when
//! our gate became the Pod's last one ([`GateClock`]): while another gate holds it, it does not
//! wait for gpu-dra-controller. gpu-controller runs it, so it works while gpu-dra-controller is
//! stopped. The admission webhook labels the Pods it gates ([`GATED_LABEL`]) and whoever lifts the
//! gate takes the label off, so only the Pods still gated are listed.

use std::time::Duration;

use claim_allocation::selection::SCHEDULING_GATE;
use component_base::Shutdown;
use controller_plumbing::EventPublisher;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::Value;

use crate::gate_clock::{GateClock, bound};

/// The label the webhook puts on a Pod it gates: the lifter lists Pods by it.
pub use gpu_api::labels::ALLOCATION_GATE_LABEL as GATED_LABEL;
/// How long a gated Pod waits for gpu-dra-controller before the gate is lifted.
pub const DEFAULT_LIFT_AFTER: Duration = Duration::from_secs(30);
/// How often gated Pods are looked at.
const PERIOD: Duration = Duration::from_secs(5);

/// The JSONPatch that removes our gate, guarded by a test that it is still where it was (a Pod
/// changed meanwhile is left for the next look), and the label with it, so the Pod is no longer
/// listed as gated.
pub fn lift_patch(pod: &Pod) -> Option<Value> {
    let gates = pod.spec.as_ref()?.scheduling_gates.as_ref()?;
    let index = gates.iter().position(|g| g.name == SCHEDULING_GATE)?;
    let labelled = pod.labels().contains_key(GATED_LABEL);
    Some(gpu_api::gate_patch::ungate_patch(Some(index), labelled))
}

/// Lifts overdue gates until `shutdown`.
pub async fn run(client: Client, after: Duration, events: EventPublisher, shutdown: Shutdown) {
    tracing::info!(
        after_seconds = after.as_secs(),
        "lifting allocation gates that wait too long"
    );
    let mut clock = GateClock::default();
    loop {
        if let Err(error) = lift_overdue(&client, after, &events, &mut clock).await {
            tracing::warn!(%error, "could not list gated Pods");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(PERIOD.min(after)) => {}
        }
    }
}

async fn lift_overdue(
    client: &Client,
    after: Duration,
    events: &EventPublisher,
    clock: &mut GateClock,
) -> kube::Result<()> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().labels(GATED_LABEL))
        .await?
        .items;
    for (index, waited) in clock.look(&pods, Timestamp::now(), after) {
        let pod = &pods[index];
        let Some(patch) = lift_patch(pod) else { continue };
        let (name, namespace) = (pod.name_any(), pod.namespace().unwrap_or_default());
        let api = Api::<Pod>::namespaced(client.clone(), &namespace);
        let patch: json_patch::Patch = serde_json::from_value(patch).expect("the lift patch is a JSONPatch");
        let params = PatchParams::default();
        if let Err(error) = api.patch(&name, &params, &Patch::Json::<()>(patch)).await {
            tracing::warn!(pod = %name, %namespace, %error, "could not lift the allocation gate");
            continue;
        }
        let note = format!(
            "scheduling gate {SCHEDULING_GATE} lifted after {}s as the Pod's last gate: gpu-dra-controller did not allocate the Pod's claims within {}s, so the kube-scheduler allocates them (first fit)",
            waited.as_secs(),
            bound(pod, after).as_secs()
        );
        tracing::warn!(pod = %name, %namespace, %note, "allocation gate lifted");
        let reference = pod.object_ref(&());
        events
            .warning(&reference, "AllocationGateLifted", "LiftGate", note)
            .await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(gates: Value, created: &str, deleting: bool) -> Pod {
        let mut pod = json!({"metadata": {"name": "p", "namespace": "ns", "creationTimestamp": created,
                "labels": {GATED_LABEL: "true", "app": "x"}},
            "spec": {"containers": [{"name": "c"}], "schedulingGates": gates}});
        if deleting {
            pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:01:00Z");
        }
        serde_json::from_value(pod).unwrap()
    }

    #[test]
    fn the_patch_removes_only_our_gate_where_it_is_and_our_label() {
        let gated = pod(
            json!([{"name": "example.com/quota"}, {"name": SCHEDULING_GATE}]),
            "2026-01-01T00:00:00Z",
            false,
        );
        let patch = lift_patch(&gated).unwrap();
        let mut applied = serde_json::to_value(&gated).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(patch).unwrap();
        json_patch::patch(&mut applied, &patch).unwrap();
        assert_eq!(
            applied["spec"]["schedulingGates"],
            json!([{"name": "example.com/quota"}])
        );
        assert_eq!(
            applied["metadata"]["labels"],
            json!({"app": "x"}),
            "the lifted Pod is no longer listed as gated"
        );
        assert_eq!(
            lift_patch(&pod(json!([{"name": "x"}]), "2026-01-01T00:00:00Z", false)),
            None
        );
    }
}
