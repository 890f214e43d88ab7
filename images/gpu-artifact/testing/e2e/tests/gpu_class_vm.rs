//! The contract the virtualization module consumes: a client with exactly its RBAC on gpuclasses
//! (get, list, watch) reads a VM GPUClass Ready=True; the ResourceClaimTemplate it builds for a VM's
//! GPU (request `gpu-0` naming the DeviceClass of the GPUClass's name, ExactCount 1, the opaque
//! `VfioDeviceConfig` of driver gpu.deckhouse.io) is allocated by the real scheduler to the whole
//! card of a bare-metal node, and the real handler prepares it as VFIO (the kernel side of vfio-pci
//! emulated). Where the cluster defines KEP-5304 device metadata (1.36+), the launcher Pod gets the
//! card's `resource.kubernetes.io/pciBusID` in the file KubeVirt reads. The class counts the card
//! as allocated while the VM has it.

mod handler_node;
mod plugin_node;
mod support;

use gpu_api::GPUClass;
use host_fixtures::{KernelEmulator, NamedHost};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use plugin_node::PluginNode;
use serde_json::{Value, json};
use support::components::rule;
use support::gpu_classes::*;
use support::{DRIVER, create, templated_pod};
use testbed::Access;

const A30: &str = "0000:01:00.0";
const VFIO_CONFIG: &str = r#"{"apiVersion":"resource.gpu.deckhouse.io/v1alpha1","kind":"VfioDeviceConfig"}"#;

/// The ResourceClaimTemplate virtualization builds for a VM's first GPU of class `class`.
fn vm_gpu_template(class: &str) -> ResourceClaimTemplate {
    let parameters: Value = serde_json::from_str(VFIO_CONFIG).unwrap();
    serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "vm-gpu-0"},
        "spec": {"spec": {"devices": {
            "requests": [{"name": "gpu-0", "exactly": {"deviceClassName": class, "allocationMode": "ExactCount", "count": 1}}],
            "config": [{"opaque": {"driver": DRIVER, "parameters": parameters}}],
        }}},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtualization_reads_a_vm_class_ready_and_its_gpu_is_prepared_as_vfio() {
    let (node, controller) = PluginNode::start_with_controller("gpuclass-vm", NamedHost::A30Pcie, &[]).await;
    let _kernel = KernelEmulator::start_with_uevents(node.s.host.clone(), node.s.ws.socket());
    let ns = &node.s.ns;
    let class = create_class(ns, "vm", json!({"deviceType": "Physical", "vfio": true})).await;

    let virtualization = ns
        .client_as(
            "virtualization-controller",
            Access::Cluster(vec![rule(
                "gpu.deckhouse.io",
                &["gpuclasses"],
                &["get", "list", "watch"],
            )]),
        )
        .await
        .unwrap();
    let as_virtualization = Api::<GPUClass>::all(virtualization);
    let ready = wait_ready(&as_virtualization, &class, "True", "DeviceClassReady").await;
    let generated = ready.status.as_ref().unwrap().generated.clone().unwrap();
    assert_eq!(generated.device_class_name, class);
    assert_eq!(
        generated.extended_resource_name,
        Some(format!("gpu.deckhouse.io/{class}"))
    );
    let denied = as_virtualization
        .patch(
            &class,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"vfio": false}})),
        )
        .await;
    assert!(
        matches!(denied, Err(kube::Error::Api(s)) if s.code == 403),
        "virtualization only reads"
    );

    let device_class = wait_device_class(ns, &class, Some(&|_| true)).await.unwrap();
    assert_eq!(
        class_parameters(&device_class),
        serde_json::from_str::<Value>(VFIO_CONFIG).unwrap()
    );
    create(&ns.api::<ResourceClaimTemplate>(), &vm_gpu_template(&class)).await;
    let mut launcher = templated_pod("virt-launcher-vm", node.s.node.name(), "vm-gpu-0");
    launcher.spec.as_mut().unwrap().resource_claims.as_mut().unwrap()[0].name = "gpu-0".into();
    launcher.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .claims
        .as_mut()
        .unwrap()[0]
        .name = "gpu-0".into();
    create(&ns.api::<Pod>(), &launcher).await;

    let prepared = node.wait_prepared("virt-launcher-vm").await;
    let (claim_name, cdi_ids) = prepared.iter().next().unwrap();
    let claim = ns.api::<ResourceClaim>().get(claim_name).await.unwrap();
    let result = &claim
        .status
        .as_ref()
        .unwrap()
        .allocation
        .as_ref()
        .unwrap()
        .devices
        .as_ref()
        .unwrap()
        .results
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        (result.request.as_str(), result.device.as_str()),
        ("gpu-0", "gpu0"),
        "the whole card"
    );
    let driver = std::fs::read_link(node.host().join(format!("sys/bus/pci/devices/{A30}/driver"))).unwrap();
    assert!(driver.ends_with("vfio-pci"), "{driver:?}");
    wait_counts(&Api::<GPUClass>::all(ns.client()), &class, (0, 1, 0)).await;
    let still = wait_ready(&as_virtualization, &class, "True", "DeviceClassReady").await;
    assert!(
        ready_of(&still).unwrap().2.contains("1 allocated"),
        "{:?}",
        ready_of(&still)
    );

    let uid = claim.metadata.uid.clone().unwrap();
    let metadata = check_device_metadata(&node, &uid, cdi_ids).await;

    ns.api::<Pod>()
        .delete("virt-launcher-vm", &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone("virt-launcher-vm").await;
    wait_counts(&Api::<GPUClass>::all(ns.client()), &class, (1, 0, 1)).await;
    // Unprepare removes the metadata files the prepare wrote (none before 1.36), at the paths the
    // prepare's spec named.
    for file in metadata {
        assert!(
            !file.exists(),
            "unprepare removes {}\n--- controller log ---\n{}",
            file.display(),
            controller.log()
        );
    }
}

/// On 1.36+ the launcher gets the card's PCI address where KubeVirt reads it; before, nothing.
/// Checks the device metadata a prepare gave the launcher; returns the files it wrote on the host
/// (its CDI spec and the metadata file the spec mounts), none before 1.36.
async fn check_device_metadata(node: &PluginNode, uid: &str, cdi_ids: &[String]) -> Vec<std::path::PathBuf> {
    let minor = node.s.ns.cluster().server_minor().await.unwrap();
    let spec_path = node
        .host()
        .join(format!("var/run/cdi/gpu.deckhouse.io_metadata_{uid}_gpu-0.json"));
    if minor < 36 {
        assert!(!spec_path.exists(), "no device metadata on 1.{minor}");
        assert!(cdi_ids.iter().all(|id| !id.contains("/metadata=")), "{cdi_ids:?}");
        return Vec::new();
    }
    assert!(
        cdi_ids.contains(&format!("gpu.deckhouse.io/metadata={uid}_gpu-0")),
        "the launcher's container gets the metadata mount: {cdi_ids:?}"
    );
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(&spec_path).unwrap()).unwrap();
    let mount = &spec["devices"][0]["containerEdits"]["mounts"][0];
    assert_eq!(
        mount["containerPath"],
        "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/gpu-0/gpu-0/gpu.deckhouse.io-metadata.json"
    );
    let host_file = std::path::PathBuf::from(mount["hostPath"].as_str().unwrap());
    let file: Value = serde_json::from_str(&std::fs::read_to_string(&host_file).unwrap()).unwrap();
    assert_eq!(file["apiVersion"], "metadata.resource.k8s.io/v1alpha1");
    assert_eq!(file["podClaimName"], "gpu-0");
    let attributes = &file["requests"][0]["devices"][0]["attributes"];
    assert_eq!(attributes["resource.kubernetes.io/pciBusID"], json!({"string": A30}));
    assert_eq!(
        attributes["resource.kubernetes.io/pcieRoot"],
        json!({"string": "pci0000:00"})
    );
    vec![spec_path, host_file]
}
