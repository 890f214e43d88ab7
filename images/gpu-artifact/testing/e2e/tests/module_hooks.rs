//! The module's hooks binary run as addon-operator runs it, against the real API server, with what it
//! writes applied as shell-operator applies it: the feature gates found and each gate that is off
//! reported (values, metric, Event on the Module), the Module made Ready by the readiness hook, nodes
//! the module cannot serve reported on the Node, and everything the module created removed when it is
//! disabled (and nothing else). The hooks that delete cluster-wide objects run one at a time.

mod support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::components::install_crds;
use support::gated_cluster::release;
use support::module_hooks::{apply_object_patches, run_hook};
use support::node_objects::create_node;
use testbed::{Progress, TestCluster, start_control_plane, wait_until};
use tokio::sync::Mutex;

/// The hooks delete and record cluster-wide objects (Events in `default`, every PhysicalGPU): one test
/// at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

fn values(version: &str) -> Value {
    json!({"global": {"discovery": {"kubernetesVersion": version}}, "gpu": {"internal": {}}})
}

async fn version_of(cluster: &TestCluster) -> String {
    format!("1.{}.0", cluster.server_minor().await.unwrap())
}

/// The Events the hooks recorded in `default` about `kind` `name` (not the control plane's own), by
/// Event name.
async fn events_about(client: &kube::Client, kind: &str, name: &str) -> BTreeMap<String, Event> {
    Api::<Event>::namespaced(client.clone(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.kind={kind},involvedObject.name={name}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("gpu-module-hooks"))
        .map(|e| (e.metadata.name.clone().unwrap(), e))
        .collect()
}

#[tokio::test]
async fn feature_gates_are_found_and_each_one_that_is_off_is_reported() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::get().await.unwrap();
    let minor = cluster.server_minor().await.unwrap();
    let run = run_hook(
        "feature-gates",
        cluster.kubeconfig_path(),
        &json!([]),
        &values(&version_of(&cluster).await),
    );
    let op = &run.values_patch[0];
    assert_eq!(
        (op["op"].as_str(), op["path"].as_str()),
        (Some("add"), Some("/gpu/internal/kubernetes"))
    );
    let gates: Vec<&str> = op["value"]["featureGates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // The test bed enables these on every version it runs (see tools/testbed/versions.sh).
    for gate in [
        "DRAConsumableCapacity",
        "DRAPartitionableDevices",
        "DRAExtendedResource",
    ] {
        assert!(gates.contains(&gate), "{gate} missing from {gates:?}");
    }
    // 1.34 leaves the alpha gates DRADeviceTaints and ResourceHealthStatus off; 1.37 has both on.
    let missing = &op["value"]["missingFeatureGates"];
    let expected = if minor <= 35 {
        json!(["DRADeviceTaints", "ResourceHealthStatus"])
    } else {
        json!([])
    };
    assert_eq!(missing, &expected);
    let off: Vec<&str> = run
        .metrics
        .iter()
        .filter(|m| m["name"] == "d8_gpu_feature_gate_enabled" && m["value"] == 0.0)
        .map(|m| m["labels"]["gate"].as_str().unwrap())
        .collect();
    assert_eq!(json!(off), expected);

    let client = cluster.client();
    apply_object_patches(&client, &run.kubernetes_patch).await;
    let events = events_about(&client, "Module", "gpu").await;
    for gate in expected.as_array().unwrap() {
        let name = format!("module.gpu.{}", gate.as_str().unwrap().to_lowercase());
        let event = events
            .get(&name)
            .unwrap_or_else(|| panic!("no Event {name}: {:?}", events.keys()));
        assert_eq!(event.reason.as_deref(), Some("FeatureGateOff"));
        assert!(event.message.as_deref().unwrap().contains("enabledFeatureGates"));
    }
}

/// DRAExtendedResource (the main user path) off on 1.34 / DRAConsumableCapacity off on the newest release,
/// on a control plane of the test's own.
#[tokio::test]
async fn a_gate_turned_off_on_the_api_server_is_reported_with_what_users_lose() {
    let release = release().await;
    let (gates, off) = if release == "1.34" {
        (
            "DRAPartitionableDevices=true,DRAConsumableCapacity=true",
            "DRAExtendedResource",
        )
    } else {
        (
            "DRAPartitionableDevices=true,DRAConsumableCapacity=false",
            "DRAConsumableCapacity",
        )
    };
    let version = if release == "1.34" { "1.34.4" } else { "1.37.2" };
    let kubeconfig =
        tokio::task::spawn_blocking(move || start_control_plane(&release, "module-hooks-gate-off", Some(gates)))
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{e:#}"));
    let run = run_hook("feature-gates", &kubeconfig, &json!([]), &values(version));
    let missing = run.values_patch[0]["value"]["missingFeatureGates"]
        .as_array()
        .unwrap()
        .clone();
    assert!(missing.contains(&json!(off)), "{off} not reported in {missing:?}");
    let event = run
        .kubernetes_patch
        .iter()
        .map(|op| &op["object"])
        .find(|e| e["metadata"]["name"] == format!("module.gpu.{}", off.to_lowercase()))
        .unwrap_or_else(|| panic!("no Event for {off}"));
    if off == "DRAExtendedResource" {
        assert!(event["message"].as_str().unwrap().contains("stay Pending"), "{event}");
    }
}

async fn install_module_crd(client: &kube::Client) {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/deckhouse/modules.deckhouse.io.yaml"
    ))
    .unwrap();
    let crd: CustomResourceDefinition = serde_yaml::from_str(&text).unwrap();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.patch(
        "modules.deckhouse.io",
        &PatchParams::apply("module-hooks-test").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    wait_until(
        "the Module CRD is served",
        std::time::Duration::from_secs(30),
        || async {
            let conditions = crds
                .get("modules.deckhouse.io")
                .await?
                .status
                .and_then(|s| s.conditions);
            let established = conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(if established {
                Progress::Done(())
            } else {
                Progress::Pending(format!("conditions {conditions:?}"))
            })
        },
    )
    .await
    .unwrap();
}

fn modules(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "Module");
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

#[tokio::test]
async fn the_readiness_hook_makes_the_module_ready_and_says_what_is_missing() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::get().await.unwrap();
    let client = cluster.client();
    install_module_crd(&client).await;
    let module: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "Module", "metadata": {"name": "gpu"},
        "properties": {"namespace": "d8-gpu"}}))
    .unwrap();
    let api = modules(&client);
    let _ = api.delete("gpu", &Default::default()).await;
    wait_until("the old Module is gone", std::time::Duration::from_secs(30), || async {
        Ok(match api.get_opt("gpu").await? {
            None => Progress::Done(()),
            Some(module) => Progress::Pending(format!("still there: {:?}", module.metadata.deletion_timestamp)),
        })
    })
    .await
    .unwrap();
    api.create(&PostParams::default(), &module).await.unwrap();
    let enabled = json!({"type": "EnabledByModuleManager", "status": "True"});
    api.patch_status(
        "gpu",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Reconciling", "conditions": [enabled]}})),
    )
    .await
    .unwrap();

    // No workload of the module in the cluster yet and two gates off: Ready, naming the gates.
    let mut with_gates = values(&version_of(&cluster).await);
    with_gates["gpu"]["internal"]["kubernetes"] = json!({"missingFeatureGates": ["DRADeviceTaints"]});
    let run = run_hook("readiness", cluster.kubeconfig_path(), &json!([]), &with_gates);
    apply_object_patches(&client, &run.kubernetes_patch).await;
    let status = api.get("gpu").await.unwrap().data["status"].clone();
    assert_eq!(status["phase"], "Ready", "{status}");
    let conditions = status["conditions"].as_array().unwrap();
    assert_eq!(
        conditions[0]["type"], "EnabledByModuleManager",
        "other conditions are kept: {status}"
    );
    let ready = conditions.iter().find(|c| c["type"] == "IsReady").unwrap();
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str()),
        (Some("True"), Some("FeatureGatesOff"))
    );
    assert!(
        ready["message"].as_str().unwrap().contains("DRADeviceTaints"),
        "{ready}"
    );

    // A Deployment of the module without an available replica (no kubelet runs it): Reconciling.
    let namespace: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "d8-gpu"}})).unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            "d8-gpu",
            &PatchParams::apply("module-hooks-test"),
            &Patch::Apply(&namespace),
        )
        .await
        .unwrap();
    let deployment: k8s_openapi::api::apps::v1::Deployment = serde_json::from_value(json!({
        "metadata": {"name": "gpu-readiness-probe", "labels": {"module": "gpu"}},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "gpu-readiness-probe"}},
                 "template": {"metadata": {"labels": {"app": "gpu-readiness-probe"}},
                              "spec": {"containers": [{"name": "c", "image": "registry.example/none@sha256:0000000000000000000000000000000000000000000000000000000000000000"}]}}}
    }))
    .unwrap();
    let deployments = Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), "d8-gpu");
    let _ = deployments.delete("gpu-readiness-probe", &Default::default()).await;
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
    let run = run_hook(
        "readiness",
        cluster.kubeconfig_path(),
        &json!([]),
        &values(&version_of(&cluster).await),
    );
    deployments
        .delete("gpu-readiness-probe", &Default::default())
        .await
        .unwrap();
    apply_object_patches(&client, &run.kubernetes_patch).await;
    let status = api.get("gpu").await.unwrap().data["status"].clone();
    assert_eq!(status["phase"], "Reconciling", "{status}");
    let ready = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "IsReady")
        .unwrap()
        .clone();
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .contains("gpu-readiness-probe has no available replica"),
        "{ready}"
    );
}

const NODE: &str = "module-hooks-worker";

fn physical_gpu(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
        "metadata": {"name": name, "labels": {"gpu.deckhouse.io/node": NODE}}, "spec": {}}))
    .unwrap()
}

fn slice(name: &str, driver: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
        "spec": {"driver": driver, "nodeName": NODE, "pool": {"name": format!("gpus/{NODE}"), "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": "gpu0"}]}}))
    .unwrap()
}

async fn dynamic(client: &kube::Client, group: &str, version: &str, kind: &str) -> Api<DynamicObject> {
    let (resource, _) = kube::discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .unwrap();
    Api::all_with(client.clone(), &resource)
}

/// A node whose NodeGroup has spec.gpu and a node whose GPUs are DriverReady without CDI get an Event;
/// then disabling the module removes its PhysicalGPUs, node labels, slices and Events and leaves the
/// admin's label, another driver's slice and the Node alone.
#[tokio::test]
async fn unserved_nodes_are_reported_and_disabling_removes_what_the_module_made() {
    let _serial = SERIAL.lock().await;
    let cluster = TestCluster::get().await.unwrap();
    let client = cluster.client();
    install_crds(&client).await;
    let labels = [
        ("gpu.deckhouse.io/os.id", "ubuntu"),
        ("gpu.deckhouse.io/kernel.version", "6.8.0-45-generic"),
        ("gpu.deckhouse.io/allow-mig", "false"),
        ("gpu.deckhouse.io/cdi", "false"),
    ];
    let node_manager = "module-hooks-node-manager-gpu";
    let nodes = Api::<Node>::all(client.clone());
    for node in [NODE, node_manager] {
        let _ = nodes.delete(node, &Default::default()).await;
    }
    create_node(&client, NODE, &labels).await;
    create_node(&client, node_manager, &[("node.deckhouse.io/gpu", "")]).await;

    // bootstrap-nodes with the snapshots addon-operator would give it.
    let contexts = json!([{"binding": "beforeHelm", "snapshots": {
        "physicalgpus": [{"filterResult": {"node": NODE, "vendor": "10de", "driverReady": "True"}}],
        "nodes": [{"filterResult": {"name": NODE, "cdi": "false", "nodeManagerGPU": false}},
                  {"filterResult": {"name": node_manager, "cdi": "", "nodeManagerGPU": true}}]}}]);
    let run = run_hook(
        "bootstrap-nodes",
        cluster.kubeconfig_path(),
        &contexts,
        &values(&version_of(&cluster).await),
    );
    apply_object_patches(&client, &run.kubernetes_patch).await;
    let reasons =
        |events: BTreeMap<String, Event>| events.values().filter_map(|e| e.reason.clone()).collect::<Vec<_>>();
    assert_eq!(reasons(events_about(&client, "Node", NODE).await), ["CDIDisabled"]);
    assert_eq!(
        reasons(events_about(&client, "Node", node_manager).await),
        ["ManagedByNodeManager"]
    );
    assert_eq!(
        run.metrics
            .iter()
            .filter(|m| m["name"] == "d8_gpu_node_not_served")
            .count(),
        2
    );

    // What a running module leaves in the cluster: a PhysicalGPU, slices of ours and of another driver.
    let gpus = dynamic(&client, "gpu.deckhouse.io", "v1alpha1", "PhysicalGPU").await;
    gpus.create(&PostParams::default(), &physical_gpu("module-hooks-worker-0-10de-20b7"))
        .await
        .unwrap();
    let slices = dynamic(&client, "resource.k8s.io", "v1", "ResourceSlice").await;
    slices
        .create(&PostParams::default(), &slice("module-hooks-ours", "gpu.deckhouse.io"))
        .await
        .unwrap();
    slices
        .create(&PostParams::default(), &slice("module-hooks-theirs", "example.com"))
        .await
        .unwrap();

    let run = run_hook(
        "cleanup-on-disable",
        cluster.kubeconfig_path(),
        &json!([{"binding": "afterDeleteHelm"}]),
        &values(&version_of(&cluster).await),
    );
    apply_object_patches(&client, &run.kubernetes_patch).await;

    // shell-operator deletes in the foreground: the objects go once the garbage collector is done.
    wait_until(
        "every PhysicalGPU and our slice are gone",
        std::time::Duration::from_secs(30),
        || async {
            let gpus_left = gpus.list(&ListParams::default()).await?.items.len();
            let ours_left = slices.get_opt("module-hooks-ours").await?.is_some();
            Ok(if gpus_left == 0 && !ours_left {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{gpus_left} PhysicalGPUs, our slice left: {ours_left}"))
            })
        },
    )
    .await
    .unwrap();
    assert!(
        slices.get_opt("module-hooks-theirs").await.unwrap().is_some(),
        "another driver's slice stays"
    );
    let node = Api::<Node>::all(client.clone()).get(NODE).await.unwrap();
    let left: Vec<String> = node
        .metadata
        .labels
        .unwrap()
        .into_keys()
        .filter(|k| k.starts_with("gpu.deckhouse.io/"))
        .collect();
    assert_eq!(left, ["gpu.deckhouse.io/allow-mig"], "only the admin's label stays");
    assert!(
        events_about(&client, "Node", NODE).await.is_empty(),
        "the hooks' Events are gone"
    );
    assert!(events_about(&client, "Node", node_manager).await.is_empty());
    slices.delete("module-hooks-theirs", &Default::default()).await.unwrap();
    for node in [NODE, node_manager] {
        nodes.delete(node, &Default::default()).await.unwrap();
    }
}
