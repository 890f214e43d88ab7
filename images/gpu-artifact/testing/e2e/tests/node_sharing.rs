//! Shared whole cards end to end through the real scheduler: a node labelled for MPS or
//! TimeSlicing offers its card as a shared device with a `sharePercent` capacity; Pods get shares
//! by ResourceClaimTemplates, the handler starts one MPS control daemon per card (stand-in tools
//! record what they were asked) and never lets two strategies meet on one card.

mod handler_node;
mod plugin_node;
mod support;

use std::time::Duration;

use host_fixtures::{NamedHost, ToolStandIns};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use plugin_node::PluginNode;
use serde_json::{Value, json};
use support::*;
use testbed::{Progress, TestNamespace, wait_until};

/// A30 node whose handler uses the stand-in tools, with the given sharing labels on its Node.
async fn shared_node(test: &str, labels: &[&str]) -> (PluginNode, ToolStandIns) {
    let s = handler_node::setup(test, NamedHost::A30Pcie).await;
    s.set_driver_ready("True").await;
    let tools = ToolStandIns::install(&s.host);
    let env = [
        ("NVIDIA_SMI", tools.nvidia_smi().display().to_string()),
        ("NVIDIA_MPS_CONTROL", tools.mps_control().display().to_string()),
    ];
    let node = PluginNode::launch(s, &env).await;
    let wanted: serde_json::Map<String, Value> = labels.iter().map(|l| (l.to_string(), json!("true"))).collect();
    Api::<Node>::all(node.s.ns.client())
        .patch(
            node.s.node.name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": wanted}})),
        )
        .await
        .unwrap();
    (node, tools)
}

async fn sharing_class(ns: &TestNamespace, strategy: &str) -> String {
    let expression = format!(
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].sharing == "{strategy}""#
    );
    let class = device_class(ns, &strategy.to_lowercase(), &expression, None);
    create(&Api::<DeviceClass>::all(ns.client()), &class).await;
    class.metadata.name.unwrap()
}

async fn share_template(ns: &TestNamespace, name: &str, class: &str, percent: u32) {
    let exactly = json!({
        "deviceClassName": class,
        "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": percent.to_string()}},
    });
    one_request_template(ns, name, exactly, None).await;
}

/// The consumed `sharePercent` and the CDI env of the Pod's one claim.
async fn share_of(node: &PluginNode, pod: &str) -> (String, Vec<String>) {
    let prepared = node.wait_prepared(pod).await;
    let claim_name = prepared.keys().next().unwrap();
    let claim = node.s.ns.api::<ResourceClaim>().get(claim_name).await.unwrap();
    let result = &claim
        .status
        .unwrap()
        .allocation
        .unwrap()
        .devices
        .unwrap()
        .results
        .unwrap()[0];
    let consumed = result.consumed_capacity.clone().unwrap_or_default();
    let percent = consumed
        .get("gpu.deckhouse.io/sharePercent")
        .map(|q| q.0.clone())
        .unwrap_or_default();
    assert!(result.share_id.is_some(), "a share has a shareID");
    let uid = claim.metadata.uid.unwrap();
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(node.cdi_file(&uid)).unwrap()).unwrap();
    let env = spec["devices"][0]["containerEdits"]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    (percent, env)
}

/// The stand-in MPS control calls as `nvidia-cuda-mps-control -d` (start) or `... <<<` (quit).
fn mps_verbs(tools: &ToolStandIns) -> Vec<String> {
    tools
        .calls()
        .into_iter()
        .filter(|c| c.starts_with("nvidia-cuda-mps-control"))
        .map(|c| c.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

async fn card_uuid(node: &PluginNode) -> String {
    let gpu = node.s.gpus.get(&node.s.name).await.unwrap();
    gpu.status
        .unwrap()
        .current_state
        .unwrap()
        .nvidia
        .unwrap()
        .gpu_uuid
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mps_shares_fill_a_card_and_a_third_waits() {
    let (node, tools) = shared_node("share-mps", &["gpu.deckhouse.io/allow-mps"]).await;
    node.wait_offered("gpu0-mps").await;
    let ns = &node.s.ns;
    let class = sharing_class(ns, "MPS").await;
    for percent in [30, 70, 50] {
        share_template(ns, &format!("mps-{percent}"), &class, percent).await;
    }
    let pods = ns.api::<Pod>();
    for percent in [30, 70] {
        create(
            &pods,
            &templated_pod(
                &format!("share-{percent}"),
                node.s.node.name(),
                &format!("mps-{percent}"),
            ),
        )
        .await;
    }
    for percent in [30, 70] {
        let (consumed, env) = share_of(&node, &format!("share-{percent}")).await;
        assert_eq!(consumed, percent.to_string());
        assert!(
            env.contains(&format!("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={percent}")),
            "{env:?}"
        );
        assert!(env.iter().any(|e| e.starts_with("CUDA_MPS_PIPE_DIRECTORY=")), "{env:?}");
        assert!(
            !env.iter().any(|e| e.starts_with("CUDA_MPS_LOG_DIRECTORY=")),
            "a container never gets the daemon's log directory: {env:?}"
        );
    }
    let uuid = card_uuid(&node).await;
    assert_eq!(
        mps_verbs(&tools),
        ["nvidia-cuda-mps-control -d"],
        "one daemon for the card"
    );
    assert!(
        tools.calls()[0].contains(&format!("CUDA_VISIBLE_DEVICES={uuid}")),
        "{:?}",
        tools.calls()
    );
    assert!(tools.mps_daemon_running(&uuid));

    create(&pods, &templated_pod("share-50", node.s.node.name(), "mps-50")).await;
    let message = wait_unschedulable(&node.s.ns, "share-50").await;
    assert!(node.kubelet.prepared(ns.name(), "share-50").is_none(), "{message}");

    for percent in [30, 70] {
        pods.delete(&format!("share-{percent}"), &DeleteParams::default())
            .await
            .unwrap();
        node.wait_pod_gone(&format!("share-{percent}")).await;
    }
    let (consumed, _) = share_of(&node, "share-50").await;
    assert_eq!(consumed, "50");
    assert_eq!(
        mps_verbs(&tools),
        [
            "nvidia-cuda-mps-control -d",
            "nvidia-cuda-mps-control <<<",
            "nvidia-cuda-mps-control -d"
        ],
        "stopped after both left, started again for the next share: {:?}",
        tools.calls()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_card_pod_waits_while_shares_hold_the_card_and_runs_once_they_leave() {
    let (node, _tools) = shared_node("share-then-whole", &["gpu.deckhouse.io/allow-mps"]).await;
    node.wait_offered("gpu0-mps").await;
    let ns = &node.s.ns;
    let class = sharing_class(ns, "MPS").await;
    share_template(ns, "mps-30", &class, 30).await;
    let exclusive = r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "Physical" && device.attributes["gpu.deckhouse.io"].sharing == "Exclusive""#;
    let whole = device_class(ns, "whole", exclusive, None);
    create(&Api::<DeviceClass>::all(ns.client()), &whole).await;
    one_request_template(ns, "whole", json!({"deviceClassName": whole.metadata.name}), None).await;
    let pods = ns.api::<Pod>();
    create(&pods, &templated_pod("share", node.s.node.name(), "mps-30")).await;
    share_of(&node, "share").await;
    wait_until("the whole card's offer withheld", Duration::from_secs(30), || async {
        let offered = node.offered().await;
        Ok(
            if offered.contains(&"gpu0".to_owned()) || offered.iter().any(|d| d.contains("-mig-")) {
                Progress::Pending(format!("{offered:?}"))
            } else {
                Progress::Done(())
            },
        )
    })
    .await
    .unwrap();

    // On 1.34 the scheduler would allocate the whole card beside the share (it misses committed
    // shares in the counters) and the Pod would stay bound forever; with the offer withheld it
    // waits unschedulable on every release.
    create(&pods, &templated_pod("whole", node.s.node.name(), "whole")).await;
    let message = wait_unschedulable(&node.s.ns, "whole").await;
    assert!(node.kubelet.prepared(ns.name(), "whole").is_none(), "{message}");
    let whole_pod = pods.get("whole").await.unwrap();
    assert!(
        whole_pod.spec.unwrap().node_name.is_none(),
        "not bound while the share runs"
    );

    pods.delete("share", &DeleteParams::default()).await.unwrap();
    node.wait_pod_gone("share").await;
    node.wait_prepared("whole").await;
    wait_until(
        "the shared offer withheld while the card is held whole",
        Duration::from_secs(30),
        || async {
            let offered = node.offered().await;
            Ok(if offered.contains(&"gpu0-mps".to_owned()) {
                Progress::Pending(format!("{offered:?}"))
            } else {
                Progress::Done(())
            })
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeslicing_and_mps_never_share_a_card() {
    let labels = ["gpu.deckhouse.io/allow-mps", "gpu.deckhouse.io/allow-timeslicing"];
    let (node, tools) = shared_node("share-mixed", &labels).await;
    node.wait_offered("gpu0-mps").await;
    node.wait_offered("gpu0-timeslicing").await;
    let ns = &node.s.ns;
    let mps = sharing_class(ns, "MPS").await;
    let slicing = sharing_class(ns, "TimeSlicing").await;
    share_template(ns, "mps", &mps, 50).await;
    share_template(ns, "slicing", &slicing, 50).await;
    let pods = ns.api::<Pod>();
    create(&pods, &templated_pod("mps", node.s.node.name(), "mps")).await;
    node.wait_prepared("mps").await;
    // The offer follows the prepare; an allocation made in between would be refused by the node.
    wait_until("the TimeSlicing offer withheld", Duration::from_secs(30), || async {
        let offered = node.offered().await;
        Ok(if offered.contains(&"gpu0-timeslicing".to_owned()) {
            Progress::Pending(format!("{offered:?}"))
        } else {
            Progress::Done(())
        })
    })
    .await
    .unwrap();
    create(&pods, &templated_pod("slicing", node.s.node.name(), "slicing")).await;
    // While MPS shares hold the card, its TimeSlicing offer is not published, so every scheduler
    // (1.34 misses committed shares in the counters) leaves the Pod unschedulable.
    let message = wait_unschedulable(&node.s.ns, "slicing").await;
    assert!(node.kubelet.prepared(ns.name(), "slicing").is_none(), "{message}");
    assert!(
        !node.offered().await.contains(&"gpu0-timeslicing".to_owned()),
        "the other strategy's offer is withheld"
    );
    assert!(
        !tools.calls().iter().any(|c| c.contains("--set-timeslice")),
        "{:?}",
        tools.calls()
    );
    pods.delete("mps", &DeleteParams::default()).await.unwrap();
    node.wait_pod_gone("mps").await;
    node.wait_prepared("slicing").await;
    assert!(
        !tools.mps_daemon_running(&card_uuid(&node).await),
        "{:?}",
        tools.calls()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_share_asking_for_vfio_is_refused_and_the_pod_says_why() {
    let (node, tools) = shared_node("share-vfio", &["gpu.deckhouse.io/allow-mps"]).await;
    node.wait_offered("gpu0-mps").await;
    let ns = &node.s.ns;
    let class = sharing_class(ns, "MPS").await;
    share_template(ns, "mps-40", &class, 40).await;
    let mut vm = templated_pod("vm", node.s.node.name(), "mps-40");
    vm.metadata.annotations = Some([("gpu.deckhouse.io/vfio".to_owned(), "true".to_owned())].into());
    create(&ns.api::<Pod>(), &vm).await;
    let message = node.wait_prepare_failure_on_pod().await;
    assert!(message.to_lowercase().contains("vfio"), "{message}");
    assert!(node.kubelet.prepared(ns.name(), "vm").is_none());
    assert!(
        mps_verbs(&tools).is_empty(),
        "no daemon was started: {:?}",
        tools.calls()
    );
}
