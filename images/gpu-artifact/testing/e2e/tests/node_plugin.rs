//! The kubelet DRA plugin end to end, through the real scheduler and kube-controller-manager: the
//! handler publishes the node's offers, the scheduler allocates, the kubelet simulator registers
//! the plugin and calls NodePrepareResources / NodeUnprepareResources over the real sockets, and
//! the test looks at what the node did: CDI specs, the checkpoint, MIG instances in the mock.

mod handler_node;
mod plugin_node;
mod support;

use std::time::Duration;

use host_fixtures::NamedHost;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::Api;
use kube::api::DeleteParams;
use plugin_node::PluginNode;
use serde_json::{Value, json};
use support::*;
use testbed::TestNamespace;

fn class_expression(device_type: &str, extra: &str) -> String {
    format!(
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "{device_type}"{extra}"#
    )
}

async fn claim_uid(ns: &TestNamespace, name: &str) -> String {
    ns.api::<ResourceClaim>().get(name).await.unwrap().metadata.uid.unwrap()
}

fn read_json(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The environment every container of the claim gets (the spec's own edits).
fn env_of(spec: &Value) -> Vec<String> {
    spec["containerEdits"]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

fn device_node_paths(spec: &Value) -> Vec<String> {
    spec["devices"][0]["containerEdits"]["deviceNodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| n["path"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_resource_pod_gets_a_prepared_card_and_gives_it_back() {
    let node = PluginNode::start("plugin-physical", NamedHost::A30Pcie, &[]).await;
    let ns = &node.s.ns;
    let resource = format!("gpu.deckhouse.io/{}", ns.name());
    let class = device_class(ns, "a30", &class_expression("Physical", ""), Some(&resource));
    create(&Api::<DeviceClass>::all(ns.client()), &class).await;
    let limits = json!({"limits": {resource.clone(): "1"}});
    create(&ns.api::<Pod>(), &pod("trainer", node.s.node.name(), limits, json!({}))).await;

    let prepared = node.wait_prepared("trainer").await;
    let pod = ns.api::<Pod>().get("trainer").await.unwrap();
    let claim_name = pod
        .status
        .unwrap()
        .extended_resource_claim_status
        .unwrap()
        .resource_claim_name;
    let uid = claim_uid(ns, &claim_name).await;
    // Beside the device, on 1.36+, the KEP-5304 device metadata of the request.
    let (devices, metadata): (Vec<String>, Vec<String>) = prepared[&claim_name]
        .iter()
        .cloned()
        .partition(|id| !id.starts_with("gpu.deckhouse.io/metadata="));
    assert_eq!(
        devices,
        vec![format!("gpu.deckhouse.io/claim={uid}-gpu0")],
        "the CDI id names the claim and the device"
    );
    let minor = testbed::TestCluster::get().await.unwrap().server_minor().await.unwrap();
    let expected_metadata: Vec<String> = if minor >= 36 {
        vec![format!("gpu.deckhouse.io/metadata={uid}_container-0-request-0")]
    } else {
        Vec::new()
    };
    assert_eq!(
        metadata, expected_metadata,
        "device metadata where the server defines it"
    );

    let spec = read_json(&node.cdi_file(&uid));
    assert_eq!(spec["kind"], "gpu.deckhouse.io/claim");
    assert_eq!(spec["devices"][0]["name"], format!("{uid}-gpu0"));
    let uuid = node
        .s
        .gpus
        .get(&node.s.name)
        .await
        .unwrap()
        .status
        .unwrap()
        .current_state
        .unwrap()
        .nvidia
        .unwrap()
        .gpu_uuid
        .unwrap();
    assert_eq!(env_of(&spec), vec![format!("NVIDIA_VISIBLE_DEVICES={uuid}")]);
    let nodes = device_node_paths(&spec);
    for path in [
        "/dev/nvidia0",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia-uvm-tools",
    ] {
        assert!(nodes.iter().any(|n| n == path), "{path} in {nodes:?}");
    }
    assert_eq!(node.checkpointed_claims(), vec![uid.clone()]);
    assert_eq!(node.checkpoint()["data"]["claims"][&uid]["state"], "PrepareCompleted");

    ns.api::<Pod>()
        .delete("trainer", &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone("trainer").await;
    assert!(!node.cdi_file(&uid).exists(), "the CDI spec is removed with the claim");
    assert!(node.checkpointed_claims().is_empty(), "{:?}", node.checkpoint());
    assert_eq!(node.kubelet.calls_for(ns.name(), &claim_name).unprepare, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mig_pods_share_a_card_at_separate_placements_and_the_whole_card_waits() {
    let node = PluginNode::start("plugin-mig", NamedHost::A30Pcie, &[]).await;
    let ns = &node.s.ns;
    let classes = Api::<DeviceClass>::all(ns.client());
    let mig = device_class(
        ns,
        "mig",
        &class_expression(
            "MIG",
            r#" && device.attributes["gpu.deckhouse.io"].migProfile == "2g.12gb""#,
        ),
        None,
    );
    let whole = device_class(ns, "whole", &class_expression("Physical", ""), None);
    create(&classes, &mig).await;
    create(&classes, &whole).await;
    one_request_template(ns, "mig-2g12gb", json!({"deviceClassName": mig.metadata.name}), None).await;
    one_request_template(ns, "whole-card", json!({"deviceClassName": whole.metadata.name}), None).await;
    let pods = ns.api::<Pod>();
    for name in ["mig-a", "mig-b"] {
        create(&pods, &templated_pod(name, node.s.node.name(), "mig-2g12gb")).await;
    }
    node.wait_prepared("mig-a").await;
    node.wait_prepared("mig-b").await;
    assert_eq!(
        node.mig_instances(),
        vec![(0, 2), (2, 2)],
        "two instances at the two placements"
    );
    assert!(node.mig_enabled());

    create(&pods, &templated_pod("whole", node.s.node.name(), "whole-card")).await;
    let pending = wait_unschedulable(ns, "whole").await;
    assert!(node.kubelet.prepared(ns.name(), "whole").is_none(), "{pending}");

    for name in ["mig-a", "mig-b"] {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    node.wait_prepared("whole").await;
    assert!(node.mig_instances().is_empty(), "the MIG instances are destroyed");
    assert!(
        !node.mig_enabled(),
        "MIG is off again before the whole card is handed out"
    );
    let prepared = node.kubelet.prepared(ns.name(), "whole").unwrap();
    let claim_name = prepared.keys().next().unwrap().clone();
    let uid = claim_uid(ns, &claim_name).await;
    assert_eq!(node.checkpointed_claims(), vec![uid]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_killed_mid_prepare_leaks_nothing_and_the_retry_completes() {
    let fault = [("GPU_HANDLER_FAULT_POINT", "prepare/after/create-devices".to_owned())];
    let mut node = PluginNode::start("plugin-crash", NamedHost::A30Pcie, &fault).await;
    let ns = &node.s.ns;
    let mig = device_class(
        ns,
        "mig",
        &class_expression(
            "MIG",
            r#" && device.attributes["gpu.deckhouse.io"].migProfile == "2g.12gb""#,
        ),
        None,
    );
    create(&Api::<DeviceClass>::all(ns.client()), &mig).await;
    one_request_template(ns, "mig-2g12gb", json!({"deviceClassName": mig.metadata.name}), None).await;
    create(
        &ns.api::<Pod>(),
        &templated_pod("job", node.s.node.name(), "mig-2g12gb"),
    )
    .await;

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while node.handler.is_running() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the handler never reached the fault point:\n{}",
            node.handler.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        node.mig_instances().len(),
        1,
        "the crash left the instance it had just made"
    );
    assert_eq!(
        node.checkpoint()["data"]["claims"].as_object().map(|c| c.len()),
        Some(1)
    );
    assert!(node.kubelet.prepared(ns.name(), "job").is_none());

    node.handler = support::components::start_handler_with(
        &node.s.ws,
        node.s.node.name(),
        &node.s.handler_kubeconfig,
        &node.mock.library_path(),
        &[],
    )
    .0;
    let prepared = node.wait_prepared("job").await;
    let claim_name = prepared.keys().next().unwrap().clone();
    let uid = claim_uid(ns, &claim_name).await;
    assert_eq!(
        node.mig_instances().len(),
        1,
        "one instance: the orphan was destroyed, the retry made one"
    );
    assert_eq!(node.checkpoint()["data"]["claims"][&uid]["state"], "PrepareCompleted");
    assert!(node.cdi_file(&uid).exists());
}

/// The handler's `/readyz`: the status code and body.
fn readyz(port: u16) -> (String, String) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "2", "-w", "\n%{http_code}"])
        .arg(format!("http://127.0.0.1:{port}/readyz"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
    (code.to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_server_that_stops_makes_the_handler_not_ready_and_says_why() {
    let node = PluginNode::start("plugin-serving", NamedHost::A30Pcie, &[]).await;
    support::components::wait_ready(node.handler_port, &node.handler).await;
    let plugins = plugin_node::kubelet_root(&node.s).join("plugins/gpu.deckhouse.io/dra.sock");
    let registration = plugin_node::kubelet_root(&node.s).join("plugins_registry/gpu.deckhouse.io-reg.sock");

    for (socket, server) in [(&plugins, "DRA"), (&registration, "registration")] {
        testbed::close_listener(node.handler.pid(), socket);
        let said = testbed::wait_until(
            &format!("gpu-handler not ready once its {server} listener is closed"),
            Duration::from_secs(60),
            || async {
                let (code, body) = readyz(node.handler_port);
                let logged = node.handler.log().contains(&format!("the {server} server stopped"));
                Ok(if code == "503" && body.contains("kubelet-plugin-serving") && logged {
                    testbed::Progress::Done(body)
                } else {
                    testbed::Progress::Pending(format!("/readyz {code} {body}; logged: {logged}"))
                })
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- gpu-handler log ---\n{}", node.handler.log()));
        assert!(said.starts_with("not ready:"), "{said}");
    }
}
