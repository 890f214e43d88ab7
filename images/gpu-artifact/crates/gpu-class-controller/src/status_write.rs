//! The status of a GPUClass: `Ready` with its reason, the generation it describes, what was
//! rendered and the device counts. Written by server-side apply under our field manager only when
//! it differs from what is stored; the transition time moves only when Ready's status does. An
//! Event on the GPUClass tells each change of reason (Warning when not Ready, or ready with an
//! extended resource conflict).

use controller_plumbing::EventPublisher;
use gpu_api::{ClassDeviceCounts, GPUClass, GPUClassStatus, GeneratedObjects};
use gpu_class::ownership::FIELD_MANAGER;
use gpu_class::readiness::{READY, Verdict};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

/// What the status should say now.
pub(crate) struct StatusUpdate {
    pub verdict: Verdict,
    pub generated: Option<GeneratedObjects>,
    pub counts: ClassDeviceCounts,
}

/// Writes `update` into `class`'s status when it differs; returns whether it wrote.
pub(crate) async fn write_status(
    api: &Api<GPUClass>,
    events: &EventPublisher,
    class: &GPUClass,
    update: StatusUpdate,
) -> Result<bool, kube::Error> {
    let previous = class
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == READY));
    let StatusUpdate {
        verdict,
        generated,
        counts,
    } = update;
    let transition = match previous {
        Some(c) if c.status == verdict.status => c.last_transition_time.clone(),
        _ => Time(Timestamp::now()),
    };
    let status = GPUClassStatus {
        conditions: Some(vec![Condition {
            type_: READY.to_owned(),
            status: verdict.status.to_owned(),
            reason: verdict.reason.to_owned(),
            message: verdict.message.clone(),
            last_transition_time: transition,
            observed_generation: class.metadata.generation,
        }]),
        observed_generation: class.metadata.generation,
        generated,
        devices: Some(counts),
    };
    if class.status.as_ref() == Some(&status) {
        return Ok(false);
    }
    let patch = json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1",
        "kind": "GPUClass",
        "metadata": {"name": class.name_any()},
        "status": status,
    });
    api.patch_status(
        &class.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    if previous.map(|c| c.reason.as_str()) != Some(verdict.reason) {
        let reference = class.object_ref(&());
        if verdict.is_warning() {
            events
                .warning(&reference, verdict.reason, "Render", verdict.message)
                .await;
        } else {
            events
                .normal(&reference, verdict.reason, "Render", verdict.message)
                .await;
        }
    }
    Ok(true)
}
