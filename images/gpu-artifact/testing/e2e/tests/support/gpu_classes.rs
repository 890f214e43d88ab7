//! GPUClasses in e2e tests: made as an admin writes them (labelled for the test's cleanup and for
//! the test's own gpu-controller), and waits on what the controller stores in their status.

use std::time::Duration;

use gpu_api::GPUClass;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};
use testbed::{Progress, TestNamespace, wait_until};

/// Creates GPUClass `<namespace>-<suffix>` with `spec`; returns its name.
pub async fn create_class(ns: &TestNamespace, suffix: &str, spec: Value) -> String {
    let class = class_object(ns, suffix, spec);
    Api::<GPUClass>::all(ns.client())
        .create(&PostParams::default(), &class)
        .await
        .unwrap_or_else(|e| panic!("GPUClass {suffix} refused: {e}"));
    ns.unique(suffix)
}

/// GPUClass `<namespace>-<suffix>` with `spec`, not created.
pub fn class_object(ns: &TestNamespace, suffix: &str, spec: Value) -> GPUClass {
    serde_json::from_value(json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUClass",
        "metadata": {"name": ns.unique(suffix), "labels": ns.owner_labels()},
        "spec": spec,
    }))
    .expect("a GPUClass")
}

/// (status, reason, message) of the class's Ready condition.
pub fn ready_of(class: &GPUClass) -> Option<(String, String, String)> {
    let condition = class
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
    ))
}

/// Waits, reading through `api` (any client, e.g. one with only virtualization's RBAC), until the
/// class is Ready `status` with `reason`; returns the class.
pub async fn wait_ready(api: &Api<GPUClass>, name: &str, status: &str, reason: &str) -> GPUClass {
    wait_class(api, name, &format!("Ready={status} ({reason})"), |class| {
        ready_of(class).is_some_and(|(s, r, _)| s == status && r == reason)
    })
    .await
}

/// Waits until the class's device counts are (published, allocated, free).
pub async fn wait_counts(api: &Api<GPUClass>, name: &str, counts: (i64, i64, i64)) -> GPUClass {
    wait_class(api, name, &format!("devices {counts:?}"), |class| {
        class
            .status
            .as_ref()
            .and_then(|s| s.devices)
            .is_some_and(|d| (d.published, d.allocated, d.free) == counts)
    })
    .await
}

async fn wait_class(api: &Api<GPUClass>, name: &str, what: &str, done: impl Fn(&GPUClass) -> bool) -> GPUClass {
    wait_until(&format!("GPUClass {name}: {what}"), Duration::from_secs(60), || async {
        let class = api.get(name).await?;
        Ok(if done(&class) {
            Progress::Done(class)
        } else {
            Progress::Pending(serde_json::to_string(&class.status).unwrap())
        })
    })
    .await
    .unwrap()
}

/// Waits until DeviceClass `name` exists and `done` holds for it (or, with `None`, until it is gone).
pub async fn wait_device_class(
    ns: &TestNamespace,
    name: &str,
    done: Option<&dyn Fn(&DeviceClass) -> bool>,
) -> Option<DeviceClass> {
    let api = Api::<DeviceClass>::all(ns.client());
    wait_until(&format!("DeviceClass {name}"), Duration::from_secs(60), || async {
        let found = api.get_opt(name).await?;
        Ok(match (found, done) {
            (None, None) => Progress::Done(None),
            (Some(dc), Some(done)) if done(&dc) => Progress::Done(Some(dc)),
            (other, _) => Progress::Pending(format!("{:?}", other.map(|dc| dc.spec))),
        })
    })
    .await
    .unwrap()
}

/// The opaque parameters of the class config of `device_class`.
pub fn class_parameters(device_class: &DeviceClass) -> Value {
    device_class.spec.config.as_ref().unwrap()[0]
        .opaque
        .as_ref()
        .unwrap()
        .parameters
        .0
        .clone()
}
