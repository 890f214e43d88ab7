//! Object builders shared by the test bed's DRA proofs. Written as JSON so each test reads like the
//! manifest a user would apply.

#![allow(dead_code)]

pub mod allocation_webhook;
pub mod components;
pub mod dra_controller_run;
pub mod examples;
pub mod gated_cluster;
pub mod gpu_classes;
pub mod kueue;
pub mod module_hooks;
pub mod node_objects;
pub mod policies;
pub mod preemption_bed;
pub mod publisher;
pub mod rendered_rbac;
pub mod user_roles;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde_json::{Value, json};
use testbed::{Progress, TestNamespace, wait_until};

pub const DRIVER: &str = "gpu.deckhouse.io";

pub fn device(name: &str, device_type: &str, consumes: Option<(&str, &str)>) -> Value {
    let mut device = json!({
        "name": name,
        "attributes": {
            "gpu.deckhouse.io/deviceType": {"string": device_type},
            "gpu.deckhouse.io/pciAddress": {"string": "0000:01:00.0"},
        },
        "capacity": {"gpu.deckhouse.io/memory": {"value": "24Gi"}},
    });
    if let Some((set, memory)) = consumes {
        device["consumesCounters"] = json!([{"counterSet": set, "counters": {"memory": {"value": memory}}}]);
    }
    device
}

pub fn slice(ns: &TestNamespace, name: &str, node: &str, count: i64, body: Value) -> ResourceSlice {
    let mut spec = json!({
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": format!("gpus/{node}"), "generation": 1, "resourceSliceCount": count},
    });
    spec.as_object_mut().unwrap().extend(body.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": ns.unique(name), "labels": ns.owner_labels()},
        "spec": spec,
    }))
    .expect("a valid ResourceSlice")
}

/// Publishes one card's counter set and offers for `node` in the layout the server needs: counters
/// beside their devices on 1.34, separate counter and device slices of one pool on 1.35+.
pub async fn publish_card(ns: &TestNamespace, node: &str, counters: Value, devices: Value) {
    let slices = Api::<ResourceSlice>::all(ns.client());
    if ns.cluster().server_minor().await.expect("server version") <= 34 {
        let both = json!({"sharedCounters": counters, "devices": devices});
        create(&slices, &slice(ns, &format!("{node}-gpus"), node, 1, both)).await;
    } else {
        let counters = json!({"sharedCounters": counters});
        create(&slices, &slice(ns, &format!("{node}-counters"), node, 2, counters)).await;
        create(
            &slices,
            &slice(ns, &format!("{node}-devices"), node, 2, json!({"devices": devices})),
        )
        .await;
    }
}

pub fn device_class(ns: &TestNamespace, name: &str, expression: &str, extended_resource: Option<&str>) -> DeviceClass {
    let mut spec = json!({"selectors": [{"cel": {"expression": expression}}]});
    if let Some(resource) = extended_resource {
        spec["extendedResourceName"] = json!(resource);
    }
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": ns.unique(name), "labels": ns.owner_labels()},
        "spec": spec,
    }))
    .expect("a valid DeviceClass")
}

/// A DeviceClass of our driver's devices of `device_type` (`Physical` or `MIG`).
pub fn device_type_class(ns: &TestNamespace, name: &str, device_type: &str) -> DeviceClass {
    let expression = format!(
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "{device_type}""#
    );
    device_class(ns, name, &expression, None)
}

/// [`device_class`] that lets its cards go to vfio-pci: the opaque `VfioDeviceConfig` an admin puts
/// on a class for virtual machines (the only way a claim may get VFIO).
pub fn vfio_class(ns: &TestNamespace, name: &str, expression: &str) -> DeviceClass {
    let mut class = device_class(ns, name, expression, None);
    class.spec.config = Some(vec![
        serde_json::from_value(json!({"opaque": {"driver": DRIVER, "parameters": {
            "apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "VfioDeviceConfig"}}}))
        .expect("a valid class config"),
    ]);
    class
}

/// A Pod pinned to `node` (tests share the cluster); `extra` is merged into its spec.
pub fn pod(name: &str, node: &str, container_resources: Value, extra: Value) -> Pod {
    let mut spec = json!({
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [{"name": "main", "image": "registry.invalid/testbed/pause:1", "resources": container_resources}],
    });
    spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
        .expect("a valid Pod")
}

/// A Pod on `node` held by our allocation gate, whose one claim, `gpu`, is the ResourceClaim
/// `claim`: gpu-dra-controller allocates a claim of its own only for a gated Pod that waits for it.
pub fn gated_claim_pod(name: &str, node: &str, claim: &str) -> Pod {
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}],
                      "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}]});
    pod(name, node, json!({"claims": [{"name": "gpu"}]}), uses)
}

/// A Pod on `node` whose one claim, `gpu`, comes from the ResourceClaimTemplate `template`.
pub fn templated_pod(name: &str, node: &str, template: &str) -> Pod {
    pod(
        name,
        node,
        json!({"claims": [{"name": "gpu"}]}),
        json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}),
    )
}

/// Creates a ResourceClaimTemplate with one request, `gpu`, whose `exactly` is `exactly` (at least
/// a `deviceClassName`), and, when given, our driver's opaque config `parameters` for it.
pub async fn one_request_template(ns: &TestNamespace, name: &str, exactly: Value, parameters: Option<Value>) {
    let mut spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}});
    if let Some(parameters) = parameters {
        spec["devices"]["config"] =
            json!([{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": parameters}}]);
    }
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name}, "spec": {"spec": spec},
    }))
    .expect("a valid ResourceClaimTemplate");
    create(&ns.api::<ResourceClaimTemplate>(), &template).await;
}

pub async fn create<K>(api: &Api<K>, object: &K) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), object)
        .await
        .expect("the API server accepts the object")
}

/// Waits until the scheduler binds `name`, returning the bound Pod.
pub async fn bound_pod(ns: &TestNamespace, name: &str) -> Pod {
    let pods = ns.api::<Pod>();
    wait_until(
        &format!("pod {}/{name} to be bound", ns.name()),
        Duration::from_secs(60),
        || async {
            let pod = pods.get(name).await?;
            Ok(match pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                Some(_) => Progress::Done(pod),
                None => Progress::Pending(scheduling_message(&pod)),
            })
        },
    )
    .await
    .expect("the scheduler binds the pod")
}

/// The PodScheduled condition as `reason: message`, or a note that there is none yet.
pub fn scheduling_message(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"))
        .map(|c| {
            format!(
                "{}: {}",
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "no PodScheduled condition yet".into())
}

/// Waits until the scheduler gave up on the Pod `pod` for now (PodScheduled False, Unschedulable);
/// returns its reason and message.
pub async fn wait_unschedulable(ns: &TestNamespace, pod: &str) -> String {
    let pods = ns.api::<Pod>();
    wait_until(
        &format!("pod {pod} to be unschedulable"),
        Duration::from_secs(60),
        || async {
            let message = scheduling_message(&pods.get(pod).await?);
            Ok(if message.starts_with("Unschedulable") {
                Progress::Done(message)
            } else {
                Progress::Pending(message)
            })
        },
    )
    .await
    .unwrap()
}

pub async fn claims(ns: &TestNamespace) -> Vec<ResourceClaim> {
    ns.api::<ResourceClaim>()
        .list(&ListParams::default())
        .await
        .expect("list claims")
        .items
}

/// (pool, device) of every allocation result of `claim`.
pub fn allocated_devices(claim: &ResourceClaim) -> Vec<(String, String)> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a| a.devices.as_ref())
        .and_then(|d| d.results.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|r| {
            assert_eq!(r.driver, DRIVER);
            (r.pool, r.device)
        })
        .collect()
}
