//! GPUClasses as workloads use them, on one A30 node labelled for MPS (the real scheduler, the
//! kubelet simulator and the real handler): a Pod asking for `gpu.deckhouse.io/<class>: 1` runs on
//! the class's whole card; a MIG class's claim gets a partition made on demand; an MPS class's
//! claims share the card by `sharePercent`. Each class's device counts follow the allocations, also
//! the counts of the classes whose devices share the card. Deleting a class in use removes its
//! DeviceClass and leaves the running claim its card.

mod handler_node;
mod plugin_node;
mod support;

use gpu_api::GPUClass;
use host_fixtures::{NamedHost, ToolStandIns};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use plugin_node::{PluginNode, setup_with_controller};
use serde_json::json;
use support::gpu_classes::*;
use support::{allocated_devices, create, one_request_template, pod, templated_pod};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classes_serve_extended_resources_mig_and_mps_and_count_what_is_allocated() {
    let (s, controller) = setup_with_controller("gpuclass-workloads", NamedHost::A30Pcie).await;
    let tools = ToolStandIns::install(&s.host);
    let env = [
        ("NVIDIA_SMI", tools.nvidia_smi().display().to_string()),
        ("NVIDIA_MPS_CONTROL", tools.mps_control().display().to_string()),
    ];
    let node = PluginNode::launch(s, &env).await;
    let ns = &node.s.ns;
    let node_name = node.s.node.name().to_owned();
    Api::<Node>::all(ns.client())
        .patch(
            &node_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"gpu.deckhouse.io/allow-mps": "true"}}})),
        )
        .await
        .unwrap();
    node.wait_offered("gpu0-mps").await;

    let whole = create_class(
        ns,
        "a30",
        json!({"deviceType": "Physical", "selector": {"matchLabels": {"gpu.deckhouse.io/device": "a30-pcie"}}}),
    )
    .await;
    let mig = create_class(
        ns,
        "mig",
        json!({"deviceType": "MIG", "nvidia": {"mig": {"profile": "2g.12gb"}}}),
    )
    .await;
    let mps = create_class(
        ns,
        "mps",
        json!({"deviceType": "Physical", "sharing": {"strategy": "MPS"}}),
    )
    .await;
    let classes = Api::<GPUClass>::all(ns.client());
    for name in [&whole, &mig, &mps] {
        wait_ready(&classes, name, "True", "DeviceClassReady").await;
    }
    wait_counts(&classes, &whole, (1, 0, 1)).await;
    wait_counts(&classes, &mig, (2, 0, 2)).await;
    wait_counts(&classes, &mps, (1, 0, 1)).await;
    let mps_class = wait_device_class(ns, &mps, Some(&|_| true)).await.unwrap();
    assert_eq!(class_parameters(&mps_class)["sharing"], json!({"strategy": "MPS"}));

    // An extended resource: the scheduler makes the claim of the class's DeviceClass.
    let limits = json!({"limits": {format!("gpu.deckhouse.io/{whole}"): "1"}});
    create(&ns.api::<Pod>(), &pod("trainer", &node_name, limits, json!({}))).await;
    let prepared = node.wait_prepared("trainer").await;
    let claim_name = prepared.keys().next().unwrap().clone();
    let claim = ns.api::<ResourceClaim>().get(&claim_name).await.unwrap();
    assert_eq!(
        allocated_devices(&claim),
        [(format!("gpus/{node_name}"), "gpu0".to_owned())]
    );
    wait_counts(&classes, &whole, (1, 1, 0)).await;
    wait_counts(&classes, &mig, (2, 0, 0)).await;
    // A card held whole publishes no shared offer (the node withholds it, so the 1.34 scheduler
    // cannot put shares beside the whole card).
    wait_counts(&classes, &mps, (0, 0, 0)).await;

    // Deleted while in use: its DeviceClass goes, the running claim keeps the card.
    classes.delete(&whole, &DeleteParams::default()).await.unwrap();
    wait_device_class(ns, &whole, None).await;
    let claim = ns.api::<ResourceClaim>().get(&claim_name).await.unwrap();
    assert_eq!(
        allocated_devices(&claim),
        [(format!("gpus/{node_name}"), "gpu0".to_owned())]
    );
    assert!(node.kubelet.prepared(ns.name(), "trainer").is_some());
    ns.api::<Pod>()
        .delete("trainer", &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone("trainer").await;
    wait_counts(&classes, &mig, (2, 0, 2)).await;

    // A MIG class: the partition is made when the claim is prepared.
    one_request_template(ns, "mig", json!({"deviceClassName": mig}), None).await;
    create(&ns.api::<Pod>(), &templated_pod("mig-job", &node_name, "mig")).await;
    node.wait_prepared("mig-job").await;
    assert_eq!(node.mig_instances().len(), 1, "one 2g.12gb instance");
    wait_counts(&classes, &mig, (2, 1, 1)).await;
    wait_counts(&classes, &mps, (0, 0, 0)).await;
    ns.api::<Pod>()
        .delete("mig-job", &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone("mig-job").await;
    wait_counts(&classes, &mps, (1, 0, 1)).await;

    // An MPS class: two claims of half the card each.
    let half = json!({"deviceClassName": mps, "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": "50"}}});
    one_request_template(ns, "half", half, None).await;
    for name in ["share-1", "share-2"] {
        create(&ns.api::<Pod>(), &templated_pod(name, &node_name, "half")).await;
    }
    for name in ["share-1", "share-2"] {
        let prepared = node.wait_prepared(name).await;
        let claim_uid = ns
            .api::<ResourceClaim>()
            .get(prepared.keys().next().unwrap())
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap();
        let spec = std::fs::read_to_string(node.cdi_file(&claim_uid)).unwrap();
        assert!(spec.contains("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"), "{spec}");
    }
    wait_counts(&classes, &mps, (1, 1, 0)).await;
    // While shares hold the card, its MIG placements are withheld.
    wait_counts(&classes, &mig, (0, 0, 0)).await;
    let _keep = (tools, controller);
}
