//! VFIO passthrough end to end: the real scheduler allocates a whole A30, the kubelet simulator
//! asks the handler to prepare it, and the handler moves the card to vfio-pci on the fixture host
//! (the kernel's side of bind/unbind emulated by `KernelEmulator`, which also tells the node agent
//! as the kernel would). Only through a DeviceClass that carries a `VfioDeviceConfig` (an admin's
//! decision): within it, the Pod annotation or the claim's own `VfioDeviceConfig` (as the
//! virtualization platform sends it) asks for it; elsewhere both are refused. Refused too for a MIG
//! device, on a virtual machine, and for a card whose IOMMU group holds a device that is not its
//! own (a network card), with the reason on the Pod and nothing moved.

mod handler_node;
mod plugin_node;
mod support;

use host_fixtures::{KernelEmulator, NamedHost};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::Api;
use kube::api::DeleteParams;
use plugin_node::PluginNode;
use serde_json::{Value, json};
use support::*;
use testbed::TestNamespace;

const A30: &str = "0000:01:00.0";

fn vm_pod(name: &str, node: &str, template: &str, annotated: bool) -> Pod {
    let mut pod = templated_pod(name, node, template);
    if annotated {
        pod.metadata.annotations = Some([("gpu.deckhouse.io/vfio".to_owned(), "true".to_owned())].into());
    }
    pod
}

async fn class(ns: &TestNamespace, name: &str, device_type: &str) -> String {
    let class = device_class(ns, name, &expression(device_type), None);
    create(&Api::<DeviceClass>::all(ns.client()), &class).await;
    class.metadata.name.unwrap()
}

fn expression(device_type: &str) -> String {
    format!(
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "{device_type}""#
    )
}

/// A class of whole cards that allows VFIO (its `VfioDeviceConfig`).
async fn vm_class(ns: &TestNamespace, name: &str) -> String {
    let class = vfio_class(ns, name, &expression("Physical"));
    create(&Api::<DeviceClass>::all(ns.client()), &class).await;
    class.metadata.name.unwrap()
}

/// The emulated kernel for the node's fixture host, telling the node agent about binding changes.
fn kernel(node: &PluginNode) -> KernelEmulator {
    KernelEmulator::start_with_uevents(node.s.host.clone(), node.s.ws.socket())
}

fn driver_of(node: &PluginNode, address: &str) -> Option<String> {
    std::fs::read_link(node.host().join(format!("sys/bus/pci/devices/{address}/driver")))
        .ok()
        .and_then(|target| target.file_name().map(|n| n.to_string_lossy().into_owned()))
}

async fn prepared_on_vfio(node: &PluginNode, pod: &str) -> Value {
    let ns = &node.s.ns;
    let prepared = node.wait_prepared(pod).await;
    let claim_name = prepared.keys().next().unwrap().clone();
    let uid = ns
        .api::<k8s_openapi::api::resource::v1::ResourceClaim>()
        .get(&claim_name)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    assert_eq!(
        driver_of(node, A30).as_deref(),
        Some("vfio-pci"),
        "the card is on vfio-pci"
    );
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(node.cdi_file(&uid)).unwrap()).unwrap();
    let text = spec.to_string();
    assert!(
        text.contains("/dev/vfio/13") && text.contains("/dev/vfio/vfio"),
        "{spec:#}"
    );
    assert!(text.contains("NVIDIA_VISIBLE_DEVICES=void"), "{spec:#}");
    let payload_path = node
        .host()
        .join(format!("var/lib/kubelet/plugins/gpu.deckhouse.io/vfio/{uid}.json"));
    let payload: Value = serde_json::from_str(&std::fs::read_to_string(&payload_path).unwrap()).unwrap();
    assert_eq!(
        payload["claim"],
        json!({"namespace": ns.name(), "name": claim_name, "uid": uid})
    );
    assert_eq!(payload["pods"][0]["name"], pod);
    let device = &payload["devices"][0];
    assert_eq!(
        (
            &device["pciAddress"],
            &device["iommuGroup"],
            &device["vendorId"],
            &device["deviceId"]
        ),
        (&json!(A30), &json!(13), &json!("10de"), &json!("20b7"))
    );
    json!({"uid": uid, "payload": payload_path.display().to_string()})
}

async fn leaves_and_gives_the_card_back(node: &PluginNode, pod: &str, prepared: &Value) {
    node.s
        .ns
        .api::<Pod>()
        .delete(pod, &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone(pod).await;
    assert_eq!(
        driver_of(node, A30).as_deref(),
        Some("nvidia"),
        "unprepare rebinds the original driver"
    );
    assert!(!std::path::Path::new(prepared["payload"].as_str().unwrap()).exists());
    assert!(!node.cdi_file(prepared["uid"].as_str().unwrap()).exists());
    node.wait_offered("gpu0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_annotated_for_vfio_gets_the_card_on_vfio_pci_and_gives_it_back() {
    let node = PluginNode::start("vfio-annotation", NamedHost::A30Pcie, &[]).await;
    let _kernel = kernel(&node);
    let ns = &node.s.ns;
    let vms = vm_class(ns, "vms").await;
    one_request_template(ns, "vm-card", json!({"deviceClassName": vms}), None).await;
    create(&ns.api::<Pod>(), &vm_pod("vm", node.s.node.name(), "vm-card", true)).await;
    let prepared = prepared_on_vfio(&node, "vm").await;
    leaves_and_gives_the_card_back(&node, "vm", &prepared).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vfio_outside_a_class_that_allows_it_is_refused_for_the_annotation_and_the_claim_config() {
    let node = PluginNode::start("vfio-not-allowed", NamedHost::A30Pcie, &[]).await;
    let _kernel = kernel(&node);
    let ns = &node.s.ns;
    let whole = class(ns, "whole", "Physical").await;
    one_request_template(ns, "whole-card", json!({"deviceClassName": whole}), None).await;
    create(&ns.api::<Pod>(), &vm_pod("vm", node.s.node.name(), "whole-card", true)).await;
    let message = node.wait_prepare_failure_on_pod().await;
    assert!(
        message.contains("an admin's decision") && message.contains("gpu.deckhouse.io/vfio"),
        "{message}"
    );
    assert!(node.kubelet.prepared(ns.name(), "vm").is_none());
    assert_eq!(driver_of(&node, A30).as_deref(), Some("nvidia"), "nothing moved");

    ns.api::<Pod>().delete("vm", &DeleteParams::default()).await.unwrap();
    node.wait_pod_gone("vm").await;
    let config = json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "VfioDeviceConfig"});
    one_request_template(ns, "claim-asks", json!({"deviceClassName": whole}), Some(config)).await;
    create(
        &ns.api::<Pod>(),
        &vm_pod("launcher", node.s.node.name(), "claim-asks", false),
    )
    .await;
    let message = node.wait_prepare_failure_on(Some("launcher")).await;
    assert!(message.contains("the claim's VfioDeviceConfig"), "{message}");
    assert_eq!(driver_of(&node, A30).as_deref(), Some("nvidia"), "nothing moved");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_sharing_its_iommu_group_with_a_network_card_is_refused_naming_the_device() {
    const NIC: &str = "0000:02:00.0";
    let node = PluginNode::start("vfio-shared-group", NamedHost::A30SharedIommuGroup, &[]).await;
    let _kernel = kernel(&node);
    let ns = &node.s.ns;
    let vms = vm_class(ns, "vms").await;
    one_request_template(ns, "vm-card", json!({"deviceClassName": vms}), None).await;
    create(&ns.api::<Pod>(), &vm_pod("vm", node.s.node.name(), "vm-card", true)).await;
    let message = node.wait_prepare_failure_on_pod().await;
    assert!(
        message.contains("IOMMU group 13")
            && message.contains(NIC)
            && message.contains("I350 Gigabit Network Connection")
            && message.contains("bound to igb"),
        "the refusal names the network card: {message}"
    );
    assert!(node.kubelet.prepared(ns.name(), "vm").is_none());
    assert_eq!(driver_of(&node, A30).as_deref(), Some("nvidia"), "the card stays");
    assert_eq!(
        driver_of(&node, NIC).as_deref(),
        Some("igb"),
        "the network card keeps its driver"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_virtual_machine_claim_with_vfio_device_config_is_prepared_as_vfio() {
    let node = PluginNode::start("vfio-config", NamedHost::A30Pcie, &[]).await;
    let _kernel = kernel(&node);
    let ns = &node.s.ns;
    let vms = vm_class(ns, "vms").await;
    // Exactly what the virtualization platform sends, within a class that allows VFIO.
    let config = json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "VfioDeviceConfig"});
    one_request_template(ns, "vm-gpu", json!({"deviceClassName": vms}), Some(config)).await;
    create(
        &ns.api::<Pod>(),
        &vm_pod("virt-launcher", node.s.node.name(), "vm-gpu", false),
    )
    .await;
    let prepared = prepared_on_vfio(&node, "virt-launcher").await;
    leaves_and_gives_the_card_back(&node, "virt-launcher", &prepared).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vfio_for_a_mig_device_is_refused_and_the_pod_says_why() {
    let node = PluginNode::start("vfio-mig", NamedHost::A30Pcie, &[]).await;
    let _kernel = kernel(&node);
    let ns = &node.s.ns;
    let mig = class(ns, "mig", "MIG").await;
    one_request_template(ns, "mig", json!({"deviceClassName": mig}), None).await;
    create(&ns.api::<Pod>(), &vm_pod("vm", node.s.node.name(), "mig", true)).await;
    let message = node.wait_prepare_failure_on_pod().await;
    assert!(message.to_lowercase().contains("vfio"), "{message}");
    assert!(node.kubelet.prepared(ns.name(), "vm").is_none());
    assert_eq!(driver_of(&node, A30).as_deref(), Some("nvidia"), "nothing moved");
    assert!(node.mig_instances().is_empty(), "no MIG instance was left behind");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vfio_on_a_virtual_machine_node_is_refused_and_the_pod_says_why() {
    const GUEST_A30: &str = "0000:06:00.0";
    let node = PluginNode::start("vfio-vm-node", NamedHost::VmQemu, &[]).await;
    let _kernel = kernel(&node);
    let ns = &node.s.ns;
    let vms = vm_class(ns, "vms").await;
    one_request_template(ns, "vm-card", json!({"deviceClassName": vms}), None).await;
    create(&ns.api::<Pod>(), &vm_pod("vm", node.s.node.name(), "vm-card", true)).await;
    let message = node.wait_prepare_failure_on_pod().await;
    assert!(message.contains("bare"), "the reason names bare metal: {message}");
    assert!(node.kubelet.prepared(ns.name(), "vm").is_none());
    assert_eq!(driver_of(&node, GUEST_A30).as_deref(), Some("nvidia"), "nothing moved");
}
