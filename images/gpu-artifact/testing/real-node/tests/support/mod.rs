//! What the real node's tests share: the node and a client, a namespace per test, the DeviceClasses
//! of docs/examples, workload Pods (the test bed's userland image) and their output, and waits that
//! fail with what they last saw.

// Each test binary uses a part of what is shared here.
#![allow(dead_code, unused_imports)]

pub mod module {
    pub use real_node::module_status::wait_module_ready;
}

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, LogParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use real_node::node::{RealNode, repo_root};
use serde_json::{Value, json};
use testbed::{Progress, wait_until};

/// The test bed's workload image: sh and busybox tools, glibc, ldconfig (images.py).
pub const WORKLOAD_IMAGE: &str = "registry.testbed.invalid/workload:1";
pub use real_node::module_status::MODULE_NAMESPACE;
/// A workload Pod runs its script within this.
pub const POD_DONE: Duration = Duration::from_secs(180);

pub async fn node() -> (&'static RealNode, Client) {
    let node = RealNode::get().await.expect("the real node (tools/testbed/node-up.sh)");
    let client = node.client().await.expect("a client of the real node's API server");
    (node, client)
}

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
    let classes = Api::<k8s_openapi::api::resource::v1::DeviceClass>::all(client.clone());
    for name in gpu_classes {
        wait_until(&format!("DeviceClass {name}"), Duration::from_secs(60), || {
            let classes = classes.clone();
            let name = name.clone();
            async move {
                Ok(match classes.get_opt(&name).await? {
                    Some(_) => Progress::Done(()),
                    None => Progress::Pending("not made yet".into()),
                })
            }
        })
        .await
        .unwrap();
    }
}

/// Server-side apply of any object (its kind must be served).
pub async fn apply(client: &Client, object: &Value) {
    let gvk = kube::api::GroupVersionKind::try_from(&kube::core::TypeMeta {
        api_version: object["apiVersion"].as_str().unwrap().into(),
        kind: object["kind"].as_str().unwrap().into(),
    })
    .unwrap();
    let (resource, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
    let name = object["metadata"]["name"].as_str().unwrap();
    let api: Api<kube::api::DynamicObject> = match (caps.scope, object["metadata"]["namespace"].as_str()) {
        (kube::discovery::Scope::Namespaced, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
        _ => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply("real-node-tests").force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {} {name}: {e}", object["kind"]));
}

/// A Pod of the workload image running `script` once, with claims `(name, claim name)` used by
/// its one container, on the real node.
pub fn workload_pod(name: &str, script: &str, claims: &[(&str, &str)], templates: &[(&str, &str)]) -> Value {
    let mut resource_claims: Vec<Value> = claims
        .iter()
        .map(|(n, c)| json!({"name": n, "resourceClaimName": c}))
        .collect();
    resource_claims.extend(
        templates
            .iter()
            .map(|(n, t)| json!({"name": n, "resourceClaimTemplateName": t})),
    );
    let uses: Vec<Value> = claims
        .iter()
        .chain(templates)
        .map(|(n, _)| json!({"name": n}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "resourceClaims": resource_claims,
            "containers": [{
                "name": "main", "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                "command": ["/bin/sh", "-c", script],
                "resources": {"claims": uses},
            }],
        },
    })
}

pub async fn create_pod(client: &Client, namespace: &str, pod: &Value) {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &serde_json::from_value(pod.clone()).unwrap())
        .await
        .unwrap_or_else(|e| panic!("create Pod {}: {e}", pod["metadata"]["name"]));
}

/// Waits until Pod `name` reaches `phase` (`Running` or `Succeeded`), failing with its status.
pub async fn wait_phase(client: &Client, namespace: &str, name: &str, phase: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    wait_until(&format!("Pod {namespace}/{name} {phase}"), POD_DONE, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await?;
            let status = pod.status.clone().unwrap_or_default();
            if status.phase.as_deref() == Some(phase) {
                return Ok(Progress::Done(pod));
            }
            if status.phase.as_deref() == Some("Failed") && phase != "Failed" {
                anyhow::bail!("Pod failed: {}", serde_json::to_string(&status)?);
            }
            Ok(Progress::Pending(describe(&pod)))
        }
    })
    .await
    .unwrap()
}

pub use real_node::module_status::{describe, module_pods};

/// What the Pod's container printed (through the API server and the real kubelet).
pub async fn logs(client: &Client, namespace: &str, name: &str) -> String {
    try_logs(client, namespace, name)
        .await
        .unwrap_or_else(|e| panic!("logs of {namespace}/{name}: {e}"))
}

/// The Pod's log, or why the kubelet could not give it (e.g. while it restarts).
pub async fn try_logs(client: &Client, namespace: &str, name: &str) -> kube::Result<String> {
    Api::<Pod>::namespaced(client.clone(), namespace)
        .logs(name, &LogParams::default())
        .await
}

/// Runs `script` in a workload Pod to its end and returns what it printed.
pub async fn run_to_end(client: &Client, namespace: &str, pod: &Value) -> String {
    create_pod(client, namespace, pod).await;
    finish_run(client, namespace, pod["metadata"]["name"].as_str().unwrap()).await
}

/// Waits until a created Pod has succeeded; what it printed.
pub async fn finish_run(client: &Client, namespace: &str, name: &str) -> String {
    wait_phase(client, namespace, name, "Succeeded").await;
    let out = logs(client, namespace, name).await;
    println!("--- {namespace}/{name} printed:\n{out}---");
    out
}

/// The script every GPU test container runs: what a CUDA container would look for.
pub const SHOW_GPUS: &str = "echo '## nvidia-smi -L'; nvidia-smi -L 2>&1; echo \"exit $?\"; \
    echo '## ldconfig -p'; ldconfig -p | grep -E 'libcuda|libnvidia-ml'; \
    echo '## device nodes'; ls /dev | grep -E '^nvidia' | sort; ls /dev/nvidia-caps 2>/dev/null | sort; \
    echo '## env'; env | grep -E '^(NVIDIA|CUDA)_' | sort";

/// `/metrics` of a module component through its kube-rbac-proxy sidecar, as Prometheus reads it:
/// HTTPS on the Pod's address inside the node's network, with the token of a ServiceAccount that
/// may `get` the workload's `prometheus-metrics` subresource (and nothing else).
pub async fn scrape(
    node: &RealNode,
    client: &Client,
    test_ns: &str,
    pod_ip: &str,
    port: u16,
    resource: &str,
    name: &str,
) -> String {
    use k8s_openapi::api::authentication::v1::TokenRequest;
    let account = format!("scraper-{name}");
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": account, "namespace": test_ns}}),
    )
    .await;
    apply(
        client,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{test_ns}-{name}"), "namespace": MODULE_NAMESPACE},
        "rules": [{"apiGroups": ["apps"], "resources": [format!("{resource}/prometheus-metrics")],
                   "resourceNames": [name], "verbs": ["get"]}]}),
    )
    .await;
    apply(
        client,
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": format!("{test_ns}-{name}"), "namespace": MODULE_NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{test_ns}-{name}")},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": test_ns}]}),
    )
    .await;
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 600}})).unwrap();
    let token = Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), test_ns)
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .expect("a token for the scraper")
        .status
        .unwrap()
        .token;
    let url = format!("https://{pod_ip}:{port}/metrics");
    wait_until(&format!("{url} answering the scraper"), Duration::from_secs(60), || {
        let out = node.exec(&[
            "curl",
            "-sk",
            "--max-time",
            "5",
            "-H",
            &format!("Authorization: Bearer {token}"),
            "-w",
            "\n%{http_code}",
            &url,
        ]);
        async move {
            let out = out?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            Ok(match text.rsplit_once('\n') {
                Some((body, "200")) => Progress::Done(body.to_owned()),
                _ => Progress::Pending(format!("{text} {}", String::from_utf8_lossy(&out.stderr))),
            })
        }
    })
    .await
    .unwrap()
}

/// The value of one sample line `name value` of a scrape.
pub fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    })
}

/// A ResourceClaim of `count` devices of `class` (and CEL `selector`, if any) in `namespace`.
pub async fn claim(client: &Client, namespace: &str, name: &str, class: &str, count: u32, selector: Option<&str>) {
    let mut exactly = json!({"deviceClassName": class, "allocationMode": "ExactCount", "count": count});
    if let Some(expression) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": expression}}]);
    }
    apply(
        client,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
    )
    .await;
}

/// The allocated devices of claim `name` and each one's `uuid` attribute from the node's slices (a
/// MIG device's card's `parentUUID`).
/// The devices of a claim and their UUIDs, once it is allocated (call it while its Pod runs: the
/// claim is deallocated when the Pod is done).
pub async fn allocated_uuids(client: &Client, namespace: &str, name: &str) -> Vec<(String, String)> {
    use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), namespace);
    let results = wait_until(&format!("ResourceClaim {namespace}/{name} allocated"), POD_DONE, || {
        let claims = claims.clone();
        async move {
            let claim = claims.get(name).await?;
            let results = claim
                .status
                .and_then(|s| s.allocation)
                .and_then(|a| a.devices)
                .and_then(|d| d.results)
                .unwrap_or_default();
            Ok(if results.is_empty() {
                Progress::Pending("not allocated".into())
            } else {
                Progress::Done(results)
            })
        }
    })
    .await
    .unwrap();
    let slices = Api::<ResourceSlice>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap()
        .items;
    results
        .iter()
        .map(|result| {
            let uuid = slices
                .iter()
                .filter(|s| s.spec.pool.name == result.pool)
                .flat_map(|s| s.spec.devices.clone().unwrap_or_default())
                .find(|d| d.name == result.device)
                .and_then(|d| d.attributes)
                .and_then(|a| {
                    // A MIG offer has no UUID before it is made: its card's.
                    let uuid = a
                        .get("gpu.deckhouse.io/uuid")
                        .or_else(|| a.get("gpu.deckhouse.io/parentUUID"));
                    uuid.and_then(|v| v.string.clone())
                })
                .unwrap_or_default();
            (result.device.clone(), uuid)
        })
        .collect()
}

/// The lines of one `## <title>` section of [`SHOW_GPUS`]' output.
pub fn section<'a>(out: &'a str, title: &str) -> Vec<&'a str> {
    out.split(&format!("## {title}\n"))
        .nth(1)
        .map(|rest| rest.lines().take_while(|l| !l.starts_with("## ")).collect())
        .unwrap_or_default()
}

/// Serializes tests that allocate the node's cards (a handful of cards, no test waits on another).
pub static CARDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
