//! Shared cards: MPS shares by sharePercent with one control daemon per card,
//! TimeSlicing shares with the card's time slice, one strategy per card, and
//! the card's sharing undone when its last share leaves or after a crash.
//! The tools are stand-ins that log what they were asked.

mod support;

use gpu_api::opaque_config::{
    GpuConfig, GpuSharing, OpaqueConfig, SharingStrategy, TimeSliceInterval, TimeSlicingConfig,
};
use node_prepare::{CardSharing, ClaimState, ReconcileReport};
use serde_json::json;
use support::{
    A30_ADDRESS, A30_UUID, Node, claim, crash_in_child, physical_request, prepare_in_child_if_asked, share_request,
};

fn mps_env(node: &Node) -> String {
    let dir = node.preparer.config().mps_dir(A30_ADDRESS);
    format!(
        "CUDA_VISIBLE_DEVICES={A30_UUID} CUDA_MPS_PIPE_DIRECTORY={0}/pipe CUDA_MPS_LOG_DIRECTORY={0}/log",
        dir.display()
    )
}

#[test]
fn two_mps_shares_run_one_daemon_and_each_container_gets_its_percentage() {
    let node = Node::a30();
    let pipe = node.preparer.config().mps_pipe_dir(A30_ADDRESS).display().to_string();
    node.preparer
        .prepare(&share_request("uid-a", SharingStrategy::Mps, 30))
        .unwrap();
    node.preparer
        .prepare(&share_request("uid-b", SharingStrategy::Mps, 70))
        .unwrap();

    assert_eq!(
        node.tool_calls(),
        [format!("nvidia-cuda-mps-control -d {}", mps_env(&node))]
    );
    assert!(node.mps_daemon_running(A30_UUID));
    for (uid, percent) in [("uid-a", 30), ("uid-b", 70)] {
        assert_eq!(
            node.cdi_json(uid)["devices"][0],
            json!({
                "name": format!("{uid}-gpu0-mps"),
                "containerEdits": {
                    "env": [
                        "CUDA_MPS_PIPE_DIRECTORY=/tmp/nvidia-mps",
                        format!("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={percent}"),
                    ],
                    "deviceNodes": [
                        {"path": "/dev/nvidia0"},
                        {"path": "/dev/nvidiactl"},
                        {"path": "/dev/nvidia-uvm"},
                        {"path": "/dev/nvidia-uvm-tools"},
                    ],
                    "mounts": [
                        {"hostPath": pipe, "containerPath": "/tmp/nvidia-mps", "options": ["rw", "nosuid", "nodev", "bind"]},
                    ],
                },
            })
        );
    }
    let claims = node.preparer.prepared_claims().unwrap();
    let mps = CardSharing {
        strategy: SharingStrategy::Mps,
        interval: None,
        default_active_thread_percentage: None,
    };
    assert_eq!(claims["uid-a"].devices[0].sharing, Some(mps.clone()));
    assert_eq!(claims["uid-b"].devices[0].sharing, Some(mps));

    node.preparer.unprepare(&claim("uid-a")).unwrap();
    assert_eq!(node.tool_calls().len(), 1, "the daemon stays for uid-b");
    assert!(node.mps_daemon_running(A30_UUID));
    node.preparer.unprepare(&claim("uid-b")).unwrap();
    assert_eq!(
        node.tool_calls()[1..],
        [format!("nvidia-cuda-mps-control <<< quit {}", mps_env(&node))]
    );
    assert!(!node.mps_daemon_running(A30_UUID));
    assert!(!node.preparer.config().mps_dir(A30_ADDRESS).exists());
}

#[test]
fn the_configs_default_percentage_wins_over_the_share() {
    let node = Node::a30();
    let mut request = share_request("uid-a", SharingStrategy::Mps, 30);
    request.devices[0].config = Some(OpaqueConfig::GpuConfig(GpuConfig {
        sharing: Some(GpuSharing {
            strategy: SharingStrategy::Mps,
            time_slicing: None,
            mps: Some(gpu_api::opaque_config::MpsConfig {
                default_active_thread_percentage: Some(25),
            }),
        }),
    }));
    node.preparer.prepare(&request).unwrap();
    let env = node.cdi_json("uid-a")["devices"][0]["containerEdits"]["env"].clone();
    assert_eq!(env[1], "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25");
    // Another share without that parameter asks for different card parameters.
    let error = node
        .preparer
        .prepare(&share_request("uid-b", SharingStrategy::Mps, 50))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-b: card 0000:01:00.0 is shared with MPS (defaultActiveThreadPercentage 25) \
         by claims default/claim-uid-a; this share asks for MPS"
    );
}

#[test]
fn a_time_sliced_card_refuses_an_mps_share_and_keeps_its_setting() {
    let node = Node::a30();
    node.preparer
        .prepare(&share_request("uid-a", SharingStrategy::TimeSlicing, 50))
        .unwrap();
    let before = node.checkpoint_text();
    let error = node
        .preparer
        .prepare(&share_request("uid-b", SharingStrategy::Mps, 50))
        .unwrap_err()
        .to_string();
    assert_eq!(
        error,
        "claim default/claim-uid-b: card 0000:01:00.0 is shared with TimeSlicing by claims default/claim-uid-a; \
         this share asks for MPS"
    );
    assert_eq!(
        node.tool_calls(),
        [format!("nvidia-smi compute-policy -i {A30_UUID} --set-timeslice 0")]
    );
    assert!(!node.mps_daemon_running(A30_UUID));
    assert_eq!(node.checkpoint_text(), before);
    assert!(!node.cdi_path("uid-b").exists());
    // Nor may the card be taken whole while it is shared.
    let error = node
        .preparer
        .prepare(&physical_request("uid-c"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("would take card 0000:01:00.0 exclusively, but the card is shared"),
        "{error}"
    );
}

#[test]
fn the_time_slice_is_set_by_the_first_share_and_reset_by_the_last() {
    let node = Node::a30();
    let long = |uid: &str| {
        let mut request = share_request(uid, SharingStrategy::TimeSlicing, 50);
        request.devices[0].config = Some(OpaqueConfig::GpuConfig(GpuConfig {
            sharing: Some(GpuSharing {
                strategy: SharingStrategy::TimeSlicing,
                time_slicing: Some(TimeSlicingConfig {
                    interval: TimeSliceInterval::Long,
                }),
                mps: None,
            }),
        }));
        request
    };
    node.preparer.prepare(&long("uid-a")).unwrap();
    node.preparer.prepare(&long("uid-b")).unwrap();
    let set = format!("nvidia-smi compute-policy -i {A30_UUID} --set-timeslice 3");
    assert_eq!(node.tool_calls(), std::slice::from_ref(&set));
    assert_eq!(
        node.cdi_json("uid-b")["containerEdits"]["env"],
        json!([format!("NVIDIA_VISIBLE_DEVICES={A30_UUID}")])
    );
    node.preparer.unprepare(&claim("uid-a")).unwrap();
    assert_eq!(node.tool_calls(), std::slice::from_ref(&set));
    node.preparer.unprepare(&claim("uid-b")).unwrap();
    assert_eq!(
        node.tool_calls(),
        [
            set,
            format!("nvidia-smi compute-policy -i {A30_UUID} --set-timeslice 0")
        ]
    );
}

#[test]
fn a_crash_after_the_daemon_started_is_rolled_back_at_start() {
    prepare_in_child_if_asked(|| share_request("uid-crash", SharingStrategy::Mps, 40));
    let node = Node::a30();
    crash_in_child(
        "a_crash_after_the_daemon_started_is_rolled_back_at_start",
        "prepare/after/apply-sharing",
        &node,
    );
    assert!(node.mps_daemon_running(A30_UUID));
    assert_eq!(
        node.preparer.prepared_claims().unwrap()["uid-crash"].state,
        ClaimState::PrepareStarted
    );
    let report = node.restarted().reconcile().unwrap();
    assert_eq!(report.started_claims_rolled_back, 1);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert!(!node.mps_daemon_running(A30_UUID));
    assert_eq!(
        node.tool_calls().last().unwrap(),
        &format!("nvidia-cuda-mps-control <<< quit {}", mps_env(&node))
    );
    assert!(!node.preparer.config().mps_dir(A30_ADDRESS).exists());
}

#[test]
fn a_daemon_no_recorded_share_needs_is_stopped_at_start() {
    let node = Node::a30();
    node.preparer
        .prepare(&share_request("uid-a", SharingStrategy::Mps, 50))
        .unwrap();
    // The claims are forgotten (a new boot id); the daemon's directory is still there.
    node.host.write_boot_id("0d5e1c2a-7b3f-4e8a-9c61-2f4b8a0e7d33");
    let report = node.restarted().reconcile().unwrap();
    assert_eq!(
        report,
        ReconcileReport {
            claims_dropped_after_reboot: 1,
            mps_daemons_stopped: 1,
            ..ReconcileReport::default()
        }
    );
    assert!(!node.mps_daemon_running(A30_UUID));
    assert!(!node.preparer.config().mps_dir(A30_ADDRESS).exists());
    assert_eq!(node.restarted().reconcile().unwrap(), ReconcileReport::default());
}

#[test]
fn a_dead_daemon_is_not_taken_for_a_running_one_and_comes_back() {
    let node = Node::a30();
    node.preparer
        .prepare(&share_request("uid-a", SharingStrategy::Mps, 50))
        .unwrap();
    let tools = host_fixtures::ToolStandIns::at(&node.host);
    let first = tools.kill_mps_daemon(A30_UUID).expect("the daemon runs");
    assert!(!node.mps_daemon_running(A30_UUID));
    assert!(
        node.preparer.config().mps_dir(A30_ADDRESS).exists(),
        "its directory is left behind"
    );

    // The upkeep (periodic in the handler) starts it again; so does the next start's reconciliation.
    assert_eq!(node.preparer.upkeep().unwrap().mps_daemons_restarted, [A30_ADDRESS]);
    let second = tools.mps_daemon_pid(A30_UUID).expect("running again");
    assert_ne!(first, second);
    assert_eq!(
        node.preparer.upkeep().unwrap().mps_daemons_restarted,
        Vec::<String>::new(),
        "running: nothing to do"
    );

    tools.kill_mps_daemon(A30_UUID).unwrap();
    let report = node.restarted().reconcile().unwrap();
    assert_eq!(report.mps_daemons_restarted, [A30_ADDRESS]);
    assert!(node.mps_daemon_running(A30_UUID));

    // A second share finds the daemon dead and starts it, rather than trusting the directory.
    tools.kill_mps_daemon(A30_UUID).unwrap();
    node.preparer
        .prepare(&share_request("uid-b", SharingStrategy::Mps, 50))
        .unwrap();
    assert!(node.mps_daemon_running(A30_UUID));
    node.preparer.unprepare(&claim("uid-a")).unwrap();
    node.preparer.unprepare(&claim("uid-b")).unwrap();
    assert!(!node.mps_daemon_running(A30_UUID));
}
