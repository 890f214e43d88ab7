//! A namespace per test, deleted also when the test fails, and objects applied as an admin would.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use real_node::node::{RealNode, repo_root};
use serde_json::{Value, json};
use testbed::{Progress, wait_until};

/// A test's namespace, deleted when the test ends, also when it fails: what a failed test holds (its
/// claims, their devices) must not starve the tests after it on the one node.
pub struct TestNamespace {
    kubeconfig: std::path::PathBuf,
    name: String,
}

impl std::ops::Deref for TestNamespace {
    type Target = str;
    fn deref(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Display for TestNamespace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let (kubeconfig, name) = (self.kubeconfig.clone(), self.name.clone());
        // A client and a runtime of their own: the test's client needs the test's runtime, which
        // this drop blocks (and which may be ending).
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async {
                let config = kube::config::Kubeconfig::read_from(&kubeconfig)?;
                let config = kube::Config::from_custom_kubeconfig(config, &Default::default()).await?;
                let client = Client::try_from(config)?;
                Api::<Namespace>::all(client)
                    .delete(&name, &DeleteParams::default())
                    .await?;
                anyhow::Ok(())
            })
        })
        .join();
    }
}

/// A namespace of its own, `rn-<test>-xxxxx`.
pub async fn namespace(client: &Client, test: &str) -> TestNamespace {
    let created = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"generateName": format!("rn-{test}-")}})).unwrap(),
        )
        .await
        .expect("create a namespace");
    let name = created.metadata.name.unwrap();
    wait_until(
        &format!("ServiceAccount {name}/default"),
        Duration::from_secs(60),
        || {
            let api = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), &name);
            async move {
                Ok(match api.get_opt("default").await? {
                    Some(_) => Progress::Done(()),
                    None => Progress::Pending("not yet".into()),
                })
            }
        },
    )
    .await
    .unwrap();
    let kubeconfig = RealNode::get().await.expect("the real node").kubeconfig.clone();
    TestNamespace { kubeconfig, name }
}

pub async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::default())
        .await;
}

/// Applies every GPUClass and DeviceClass of `docs/examples` (what the docs tell an admin to apply)
/// and waits until gpu-controller has made the DeviceClass of each GPUClass.
pub async fn apply_example_device_classes(client: &Client) {
    let dir = repo_root().join("docs/examples");
    let mut gpu_classes = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("deviceclass-") || name.starts_with("gpuclass-")) {
            continue;
        }
        let class: Value = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if class["kind"] == "GPUClass" {
            gpu_classes.push(class["metadata"]["name"].as_str().unwrap().to_owned());
        }
        apply(client, &class).await;
    }
    for name in gpu_classes {
        wait_device_class(client, &name).await;
    }
}

/// Applies an MPS GPUClass `name` with `allocationPolicy: FirstFit` (the kube-scheduler allocates its
/// claims, no gate is lifted) and waits for its DeviceClass; returns it, for [`delete_object`].
pub async fn first_fit_mps_class(client: &Client, name: &str) -> Value {
    let class = serde_json::json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUClass",
        "metadata": {"name": name},
        "spec": {"vendor": "Nvidia", "deviceType": "Physical", "sharing": {"strategy": "MPS"},
            "allocationPolicy": "FirstFit"}});
    apply(client, &class).await;
    wait_device_class(client, name).await;
    class
}

/// Waits until gpu-controller has made the DeviceClass of GPUClass `name`.
pub async fn wait_device_class(client: &Client, name: &str) {
    let classes = Api::<k8s_openapi::api::resource::v1::DeviceClass>::all(client.clone());
    wait_until(&format!("DeviceClass {name}"), Duration::from_secs(60), || {
        let classes = classes.clone();
        async move {
            Ok(match classes.get_opt(name).await? {
                Some(_) => Progress::Done(()),
                None => Progress::Pending("not made yet".into()),
            })
        }
    })
    .await
    .unwrap();
}

/// Server-side apply of any object (its kind must be served).
pub async fn apply(client: &Client, object: &Value) {
    let name = object["metadata"]["name"].as_str().unwrap();
    api_of(client, object)
        .await
        .patch(
            name,
            &PatchParams::apply("real-node-tests").force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap_or_else(|e| panic!("apply {} {name}: {e}", object["kind"]));
}

/// Deletes the object `object` names (`apiVersion`, `kind`, `metadata`), if it exists.
pub async fn delete_object(client: &Client, object: &Value) {
    let name = object["metadata"]["name"].as_str().unwrap();
    let _ = api_of(client, object)
        .await
        .delete(name, &DeleteParams::default())
        .await;
}

/// The API of the object's kind, in its namespace when it has one.
async fn api_of(client: &Client, object: &Value) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::try_from(&kube::core::TypeMeta {
        api_version: object["apiVersion"].as_str().unwrap().into(),
        kind: object["kind"].as_str().unwrap().into(),
    })
    .unwrap();
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    match (caps.scope, object["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    }
}
