//! The module's hooks binary run as addon-operator runs it, against the real API server, with what it
//! writes applied as shell-operator applies it: the feature gates found and each gate that is off
//! reported (values, metric, Event on the Module) and the Module made Ready by the readiness hook
//! (module_hooks_cleanup.rs has the unserved nodes and disabling). The hooks that record
//! cluster-wide objects run one at a time.

mod support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use support::gated_cluster::release;
use support::module_hooks::{apply_object_patches, events_about, run_hook, values, version_of};
use testbed::{Progress, TestCluster, start_control_plane, wait_until};
use tokio::sync::Mutex;

/// The hooks delete and record cluster-wide objects (Events in `default`, every PhysicalGPU): one test
/// at a time.
static SERIAL: Mutex<()> = Mutex::const_new(());

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
    // The test bed enables every gate the module uses on every version it runs (see
    // tools/testbed/versions.sh; on 1.34 also the alpha DRADeviceTaints and ResourceHealthStatus, for
    // the health tests): none is reported off. The next test turns one off.
    for gate in [
        "DRAConsumableCapacity",
        "DRAPartitionableDevices",
        "DRAExtendedResource",
        "DRADeviceTaints",
        "ResourceHealthStatus",
    ] {
        assert!(gates.contains(&gate), "{gate} missing from {gates:?} on 1.{minor}");
    }
    let missing = &op["value"]["missingFeatureGates"];
    let expected = json!([]);
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
