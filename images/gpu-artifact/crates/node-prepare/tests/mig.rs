//! MIG devices made on demand: MIG mode on for the first, instances at the
//! allocated placements, whole-card and overlapping requests refused, and
//! everything (MIG mode included) taken back when the last claim leaves.

mod support;

use node_prepare::{ClaimState, PrepareError};
use support::{Node, claim, mig_minors, mig_request, physical_request};

#[test]
fn two_claims_get_instances_at_their_placements_with_their_own_cdi_specs() {
    let node = Node::a30();
    let first = node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    let second = node.preparer.prepare(&mig_request("uid-b", &[2])).unwrap();

    let gpu = node.mock_gpu();
    assert!(gpu.mig_current && gpu.mig_pending);
    assert_eq!(node.instance_starts(), [0, 2]);
    assert!(
        gpu.gpu_instances
            .iter()
            .all(|gi| gi.profile_id == 5 && gi.placement.size == 2)
    );
    assert_eq!(
        first[0].cdi_device_ids,
        ["gpu.deckhouse.io/claim=uid-a-gpu0-mig-2g12gb-0"]
    );
    assert_eq!(
        second[0].cdi_device_ids,
        ["gpu.deckhouse.io/claim=uid-b-gpu0-mig-2g12gb-2"]
    );

    let claims = node.preparer.prepared_claims().unwrap();
    for (uid, start) in [("uid-a", 0), ("uid-b", 2)] {
        let entry = &claims[uid];
        assert_eq!(entry.state, ClaimState::PrepareCompleted);
        let record = entry.devices[0].mig_instance.clone().expect("instance recorded");
        let made = gpu.gpu_instances.iter().find(|gi| gi.placement.start == start).unwrap();
        assert_eq!(record.gpu_instance_id, made.id);
        assert_eq!(record.compute_instance_id, made.compute_instances[0].id);
        assert_eq!(record.uuid, made.compute_instances[0].uuid);

        let spec = node.cdi_json(uid);
        let edits = &spec["devices"][0]["containerEdits"];
        assert_eq!(spec["devices"][0]["name"], format!("{uid}-gpu0-mig-2g12gb-{start}"));
        assert_eq!(
            spec["containerEdits"]["env"][0],
            format!("NVIDIA_VISIBLE_DEVICES={}", record.uuid)
        );
        let (gi_minor, ci_minor) = mig_minors(0, record.gpu_instance_id, record.compute_instance_id);
        let nodes: Vec<&str> = edits["deviceNodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            nodes,
            [
                "/dev/nvidia0".to_string(),
                "/dev/nvidiactl".into(),
                "/dev/nvidia-uvm".into(),
                "/dev/nvidia-uvm-tools".into(),
                format!("/dev/nvidia-caps/nvidia-cap{gi_minor}"),
                format!("/dev/nvidia-caps/nvidia-cap{ci_minor}"),
            ]
        );
    }
}

#[test]
fn a_whole_card_request_on_a_mig_card_is_refused_and_nothing_changes() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    let mock_before = node.mock.state().snapshot().unwrap();
    let checkpoint_before = node.checkpoint_text();

    let error = node.preparer.prepare(&physical_request("uid-p")).unwrap_err();
    assert!(matches!(error, PrepareError::Refused { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.starts_with("claim default/claim-uid-p: device gpu0 "),
        "{message}"
    );
    assert!(message.contains("carries only MIG allocations"), "{message}");
    assert!(
        message.contains("gpu0-mig-2g12gb-0 of claim default/claim-uid-a"),
        "{message}"
    );

    assert_eq!(node.mock.state().snapshot().unwrap(), mock_before);
    assert_eq!(node.checkpoint_text(), checkpoint_before);
    assert!(!node.cdi_path("uid-p").exists());
}

#[test]
fn a_mig_request_on_a_prepared_whole_card_is_refused() {
    let node = Node::a30();
    node.preparer.prepare(&physical_request("uid-p")).unwrap();
    let error = node
        .preparer
        .prepare(&mig_request("uid-a", &[0]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("carries only MIG allocations"), "{error}");
    let gpu = node.mock_gpu();
    assert!(!gpu.mig_current && gpu.gpu_instances.is_empty());
}

#[test]
fn the_same_mig_device_for_another_claim_is_refused() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-a", &[2])).unwrap();
    let error = node
        .preparer
        .prepare(&mig_request("uid-b", &[2]))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-b: device gpu0-mig-2g12gb-2 is prepared for claim default/claim-uid-a"
    );
    assert_eq!(node.instance_starts(), [2]);
    assert!(!node.preparer.prepared_claims().unwrap().contains_key("uid-b"));
}

#[test]
fn unpreparing_both_claims_destroys_the_instances_and_turns_mig_off() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    node.preparer.prepare(&mig_request("uid-b", &[2])).unwrap();

    node.preparer.unprepare(&claim("uid-a")).unwrap();
    assert_eq!(node.instance_starts(), [2]);
    assert!(node.mock_gpu().mig_current, "MIG stays on while a MIG claim is left");
    assert!(!node.cdi_path("uid-a").exists());
    assert!(node.cdi_path("uid-b").exists());

    node.restarted().unprepare(&claim("uid-b")).unwrap();
    let gpu = node.mock_gpu();
    assert!(gpu.gpu_instances.is_empty());
    assert!(!gpu.mig_current && !gpu.mig_pending);
    assert!(!node.cdi_path("uid-b").exists());
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
}

#[test]
fn an_instance_in_use_keeps_the_claim_recorded_for_the_next_attempt() {
    let node = Node::a30();
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    let gi = node.mock_gpu().gpu_instances[0].clone();
    let process = mock_nvml::state::ProcessState {
        pid: 777,
        used_gpu_memory_bytes: 1 << 30,
        gpu_instance_id: Some(gi.id),
        compute_instance_id: Some(gi.compute_instances[0].id),
        name: None,
    };
    node.mock.state().add_process(support::A30_ADDRESS, process).unwrap();

    let error = node.preparer.unprepare(&claim("uid-a")).unwrap_err().to_string();
    assert!(
        error.starts_with("claim default/claim-uid-a: device gpu0-mig-2g12gb-0: "),
        "{error}"
    );
    assert!(node.preparer.prepared_claims().unwrap().contains_key("uid-a"));
    assert!(node.cdi_path("uid-a").exists());

    node.mock.state().remove_process(support::A30_ADDRESS, 777).unwrap();
    node.preparer.unprepare(&claim("uid-a")).unwrap();
    assert!(node.mock_gpu().gpu_instances.is_empty());
}

#[test]
fn a_card_busy_with_processes_is_not_switched_to_mig() {
    let node = Node::a30();
    let process = mock_nvml::state::ProcessState {
        pid: 555,
        used_gpu_memory_bytes: 1 << 30,
        gpu_instance_id: None,
        compute_instance_id: None,
        name: None,
    };
    node.mock.state().add_process(support::A30_ADDRESS, process).unwrap();
    let error = node
        .preparer
        .prepare(&mig_request("uid-a", &[0]))
        .unwrap_err()
        .to_string();
    assert!(error.contains("runs processes (NVML lists pid 555)"), "{error}");
    let gpu = node.mock_gpu();
    assert!(!gpu.mig_current && !gpu.mig_pending);
    assert!(
        node.preparer.prepared_claims().unwrap().is_empty(),
        "the PrepareStarted record was undone"
    );
}

#[test]
fn a_mode_change_held_up_by_a_client_is_taken_back_and_names_the_holders() {
    let node = Node::a30();
    // DCGM's host engine holds the card open: NVML lists no process, the change stays pending.
    let dcgm = mock_nvml::state::ClientState {
        pid: 4321,
        name: "nv-hostengine".into(),
    };
    node.mock.state().add_client(support::A30_ADDRESS, dcgm).unwrap();
    let error = node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap_err();
    assert!(
        matches!(error, PrepareError::MigModePending { enable: true, .. }),
        "{error}"
    );
    let message = error.to_string();
    assert!(
        message.contains("card 0000:01:00.0: turning MIG mode on stayed pending")
            && message.contains("NVML lists no process with a context on it")
            && message.contains("DCGM on this node is paused"),
        "{message}"
    );
    let gpu = node.mock_gpu();
    assert!(
        !gpu.mig_current && !gpu.mig_pending,
        "the pending change was taken back"
    );
    assert!(node.preparer.prepared_claims().unwrap().is_empty());
    assert!(
        !node.checkpoint_text().contains("migEnabledByNode"),
        "no record of a switch that did not happen"
    );

    // Once DCGM lets the card go, the retry switches and prepares.
    node.mock.state().remove_client(support::A30_ADDRESS, 4321).unwrap();
    node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    assert!(node.mock_gpu().mig_current);
}

#[test]
fn the_processes_holding_a_card_are_named_as_nvml_reports_them() {
    let node = Node::a30();
    let process = mock_nvml::state::ProcessState {
        pid: 555,
        used_gpu_memory_bytes: 1 << 30,
        gpu_instance_id: None,
        compute_instance_id: None,
        name: Some("python3".into()),
    };
    node.mock.state().add_process(support::A30_ADDRESS, process).unwrap();
    let error = node
        .preparer
        .prepare(&mig_request("uid-a", &[0]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("runs processes (NVML lists pid 555 (python3))"),
        "{error}"
    );
}

#[test]
fn a_prepared_claim_asked_again_for_other_devices_is_refused_and_keeps_its_own() {
    let node = Node::a30();
    let first = node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap();
    // The kubelet's repeat of the same call gets the same answer.
    assert_eq!(node.preparer.prepare(&mig_request("uid-a", &[0])).unwrap(), first);

    // The claim was deallocated and allocated again (placement 2) while the node kept its first
    // devices, say because its unprepare was lost: the recorded devices are not what it holds now.
    let error = node.preparer.prepare(&mig_request("uid-a", &[2])).unwrap_err();
    assert!(matches!(error, PrepareError::Refused { .. }), "{error}");
    let message = error.to_string();
    assert!(
        message.contains("gpu0-mig-2g12gb-0") && message.contains("gpu0-mig-2g12gb-2"),
        "names what it holds and what it is asked for: {message}"
    );
    assert_eq!(
        node.instance_starts(),
        [0],
        "its first device is kept for the running containers"
    );
    assert_eq!(
        node.preparer.prepared_claims().unwrap()["uid-a"].state,
        ClaimState::PrepareCompleted
    );
}

/// The environment a container gets from CDI devices `ids` of `spec`, as the runtime applies them
/// (tags.cncf.io/container-device-interface `ContainerEdits.Apply`: the spec's edits before its
/// first device's, then each device's; an `env` entry replaces an earlier one of the same name).
fn injected_env(spec: &serde_json::Value, devices: &[&str]) -> std::collections::BTreeMap<String, String> {
    let mut edits = vec![&spec["containerEdits"]];
    for name in devices {
        let device = spec["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == *name)
            .unwrap();
        edits.push(&device["containerEdits"]);
    }
    let mut env = std::collections::BTreeMap::new();
    for entry in edits.iter().filter_map(|e| e["env"].as_array()).flatten() {
        let (key, value) = entry.as_str().unwrap().split_once('=').unwrap();
        env.insert(key.to_owned(), value.to_owned());
    }
    env
}

#[test]
fn a_container_given_two_devices_by_two_requests_sees_both_in_nvidia_visible_devices() {
    let node = Node::a30();
    let mut request = mig_request("uid-a", &[0, 2]);
    request.devices[1].request = "second".into();
    node.preparer.prepare(&request).unwrap();
    let claims = node.preparer.prepared_claims().unwrap();
    let uuids: Vec<String> = claims["uid-a"]
        .devices
        .iter()
        .map(|d| d.mig_instance.as_ref().unwrap().uuid.clone())
        .collect();

    let spec = node.cdi_json("uid-a");
    let env = injected_env(&spec, &["uid-a-gpu0-mig-2g12gb-0", "uid-a-gpu0-mig-2g12gb-2"]);
    assert_eq!(env["NVIDIA_VISIBLE_DEVICES"], uuids.join(","), "{spec:#}");
}
