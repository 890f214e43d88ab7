//! Whole cards handed to vfio-pci for virtual machines, on fixture hosts
//! whose kernel side (driver links after unbind/bind writes) the fixtures'
//! kernel emulator plays: the card and its own functions move, the QEMU hook
//! payload and the CDI spec say where, unprepare gives everything back, and
//! unsafe requests (a class that does not allow VFIO, a group holding another
//! device, a MIG device, a busy card, a virtual machine) are refused before
//! anything moves.

mod support;

use gpu_api::opaque_config::{OpaqueConfig, VfioDeviceConfig};
use host_fixtures::NamedHost;
use mock_nvml::state::ProcessState;
use node_prepare::{ClaimState, VfioFunctionRecord, VfioRecord};
use serde_json::json;
use support::{
    A30_ADDRESS, Node, claim, crash_in_child, mig_request, physical_request, prepare_in_child_if_asked, vfio_request,
};

const UID: &str = "uid-vm";

fn payload(node: &Node, uid: &str) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(node.preparer.config().vfio_payload_path(uid)).unwrap()).unwrap()
}

#[test]
fn an_a30_goes_to_vfio_with_its_payload_and_comes_back_to_nvidia() {
    let node = Node::a30().with_kernel();
    let devices = node.preparer.prepare(&vfio_request(UID, A30_ADDRESS)).unwrap();
    assert_eq!(
        devices[0].cdi_device_ids,
        [format!("gpu.deckhouse.io/claim={UID}-gpu0")]
    );
    assert_eq!(node.driver_of(A30_ADDRESS).as_deref(), Some("vfio-pci"));
    assert_eq!(
        std::fs::read_to_string(node.host.path("sys/bus/pci/devices/0000:01:00.0/driver_override")).unwrap(),
        "vfio-pci"
    );
    assert_eq!(
        payload(&node, UID),
        json!({
            "claim": {"namespace": "default", "name": "claim-uid-vm", "uid": UID},
            "pods": [{"namespace": "default", "name": "vm-0", "uid": "pod-uid-0"}],
            "devices": [{
                "request": "gpu",
                "device": "gpu0",
                "pciAddress": "0000:01:00.0",
                "iommuGroup": 13,
                "vendorId": "10de",
                "deviceId": "20b7",
                "functions": ["0000:01:00.0"],
            }],
        })
    );
    let payload_path = node.preparer.config().vfio_payload_path(UID).display().to_string();
    assert_eq!(
        node.cdi_json(UID),
        json!({
            "cdiVersion": "0.6.0",
            "kind": "gpu.deckhouse.io/claim",
            "devices": [{
                "name": format!("{UID}-gpu0"),
                "containerEdits": {
                    "deviceNodes": [{"path": "/dev/vfio/13"}],
                },
            }],
            "containerEdits": {
                "env": ["NVIDIA_VISIBLE_DEVICES=void"],
                "deviceNodes": [{"path": "/dev/vfio/vfio"}],
                "mounts": [{
                    "hostPath": payload_path,
                    "containerPath": format!("/var/run/gpu.deckhouse.io/vfio/{UID}.json"),
                    "options": ["ro", "nosuid", "nodev", "bind"],
                }],
            },
        })
    );
    let entry = &node.preparer.prepared_claims().unwrap()[UID];
    assert_eq!(entry.state, ClaimState::PrepareCompleted);
    assert_eq!(
        entry.devices[0].vfio,
        Some(VfioRecord {
            iommu_group: 13,
            functions: vec![VfioFunctionRecord {
                address: A30_ADDRESS.into(),
                original_driver: Some("nvidia".into()),
            }],
        })
    );

    node.preparer.unprepare(&claim(UID)).unwrap();
    assert_eq!(node.driver_of(A30_ADDRESS).as_deref(), Some("nvidia"));
    assert_eq!(
        std::fs::read_to_string(node.host.path("sys/bus/pci/devices/0000:01:00.0/driver_override")).unwrap(),
        "\n"
    );
    assert!(!node.preparer.config().vfio_payload_path(UID).exists());
    assert!(!node.cdi_path(UID).exists());
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
}

#[test]
fn the_audio_function_of_the_group_moves_with_the_card_and_comes_back() {
    let node = Node::on(NamedHost::ConsumerWithAudio).with_kernel();
    node.preparer.prepare(&vfio_request(UID, "0000:01:00.0")).unwrap();
    assert_eq!(node.driver_of("0000:01:00.0").as_deref(), Some("vfio-pci"));
    assert_eq!(node.driver_of("0000:01:00.1").as_deref(), Some("vfio-pci"));
    let device = &payload(&node, UID)["devices"][0];
    assert_eq!(device["iommuGroup"], 12);
    assert_eq!(device["deviceId"], "2684");
    assert_eq!(device["functions"], json!(["0000:01:00.0", "0000:01:00.1"]));
    assert_eq!(
        node.cdi_json(UID)["devices"][0]["containerEdits"]["deviceNodes"],
        json!([{"path": "/dev/vfio/12"}])
    );

    node.preparer.unprepare(&claim(UID)).unwrap();
    assert_eq!(node.driver_of("0000:01:00.0").as_deref(), Some("nvidia"));
    assert_eq!(node.driver_of("0000:01:00.1").as_deref(), Some("snd_hda_intel"));
}

#[test]
fn a_vfio_device_config_asks_for_it_without_the_annotation() {
    let node = Node::a30().with_kernel();
    let mut request = physical_request(UID);
    request.devices[0].config = Some(OpaqueConfig::VfioDeviceConfig(VfioDeviceConfig {}));
    let error = node.preparer.prepare(&request).unwrap_err().to_string();
    assert!(
        error.contains("an admin's decision"),
        "a class that does not allow VFIO: {error}"
    );
    assert_eq!(node.driver_of(A30_ADDRESS).as_deref(), Some("nvidia"));
    request.devices[0].vfio_allowed = true;
    node.preparer.prepare(&request).unwrap();
    assert_eq!(node.driver_of(A30_ADDRESS).as_deref(), Some("vfio-pci"));
    assert_eq!(payload(&node, UID)["pods"], json!([]));
}

#[test]
fn a_card_whose_iommu_group_holds_a_network_card_is_refused_and_nothing_moves() {
    let node = Node::on(NamedHost::A30SharedIommuGroup).with_kernel();
    let error = node
        .preparer
        .prepare(&vfio_request(UID, A30_ADDRESS))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-vm: device gpu0: card 0000:01:00.0 shares IOMMU group 13 with devices that are not \
         its own: 0000:02:00.0 Intel Corporation I350 Gigabit Network Connection (8086:1521, Ethernet controller, \
         bound to igb); passthrough would take them from the host. Put the card in a slot with an IOMMU group of \
         its own (or enable ACS on the ports above it)"
    );
    assert_eq!(node.driver_of(A30_ADDRESS).as_deref(), Some("nvidia"));
    assert_eq!(node.driver_of("0000:02:00.0").as_deref(), Some("igb"));
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
    assert!(!node.cdi_path(UID).exists());
}

#[test]
fn a_virtual_machine_node_is_refused_and_nothing_moves() {
    let node = Node::on(NamedHost::VmQemu).with_kernel();
    let error = node
        .preparer
        .prepare(&vfio_request(UID, "0000:06:00.0"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-vm: device gpu0: VFIO passthrough needs a bare-metal node, and this node is not one: \
         DMI sys_vendor \"QEMU\" names a hypervisor or cloud (QEMU)"
    );
    assert_eq!(node.driver_of("0000:06:00.0").as_deref(), Some("nvidia"));
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
}

#[test]
fn a_mig_device_or_a_busy_card_is_refused_and_nothing_moves() {
    let node = Node::a30().with_kernel();
    let mut mig = mig_request(UID, &[0]);
    mig.vfio_requested = true;
    let error = node.preparer.prepare(&mig).unwrap_err().to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-vm: device gpu0-mig-2g12gb-0: it is a MIG device; VFIO passthrough needs an exclusive whole card"
    );
    assert!(node.mock_gpu().gpu_instances.is_empty());

    let process = ProcessState {
        pid: 4242,
        used_gpu_memory_bytes: 1 << 30,
        gpu_instance_id: None,
        compute_instance_id: None,
        name: None,
    };
    node.mock.state().add_process(A30_ADDRESS, process).unwrap();
    let error = node
        .preparer
        .prepare(&vfio_request(UID, A30_ADDRESS))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-vm: device gpu0: card 0000:01:00.0 runs processes (pids 4242); \
         it is handed to vfio-pci only when idle"
    );
    assert_eq!(node.driver_of(A30_ADDRESS).as_deref(), Some("nvidia"));
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
    assert!(!node.cdi_path(UID).exists());
}

#[test]
fn a_crash_with_half_the_group_moved_is_given_back_at_start() {
    prepare_in_child_if_asked(|| vfio_request(UID, "0000:01:00.0"));
    let node = Node::on(NamedHost::ConsumerWithAudio).with_kernel();
    crash_in_child(
        "a_crash_with_half_the_group_moved_is_given_back_at_start",
        "prepare/inside/bind-vfio/function-moved",
        &node,
    );
    assert_eq!(node.driver_of("0000:01:00.0").as_deref(), Some("vfio-pci"));
    assert_eq!(node.driver_of("0000:01:00.1").as_deref(), Some("snd_hda_intel"));
    let entry = &node.preparer.prepared_claims().unwrap()[UID];
    assert_eq!(entry.state, ClaimState::PrepareStarted);
    assert_eq!(entry.devices[0].vfio.as_ref().map(|r| r.functions.len()), Some(2));

    let report = node.restarted().reconcile().unwrap();
    assert_eq!(report.started_claims_rolled_back, 1);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(node.driver_of("0000:01:00.0").as_deref(), Some("nvidia"));
    assert_eq!(node.driver_of("0000:01:00.1").as_deref(), Some("snd_hda_intel"));
    assert!(node.preparer.prepared_claims().unwrap().is_empty());

    // The kubelet retries: the claim prepares from the restored card.
    node.restarted().prepare(&vfio_request(UID, "0000:01:00.0")).unwrap();
    assert_eq!(node.driver_of("0000:01:00.1").as_deref(), Some("vfio-pci"));
}
