//! What "exactly right" means after a crash, a restart and the kubelet's retry, read from what
//! the node holds: the checkpoint file, the CDI directory, the QEMU payloads, the mock NVML's
//! instances and MIG mode, the stand-in tools' MPS daemons and time slices, the fixture's driver
//! links.

use kubelet_plugin::PreparedDevice;
use node_prepare::ClaimState;

use crate::cases::{Mode, UID};
use crate::support::{A30_UUID, Node};

/// The functions VFIO moves on the VFIO node: the card and its audio function.
const VFIO_FUNCTIONS: [&str; 2] = ["0000:01:00.0", "0000:01:00.1"];

fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| entry.path().is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

fn checkpoint_data(node: &Node) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(&node.checkpoint_text())
        .map_or(serde_json::Value::Null, |file| file["data"].clone())
}

/// The claim prepared once: one completed record, one CDI spec, and exactly its mode's devices.
pub fn assert_prepared_once(node: &Node, mode: Mode, devices: &[PreparedDevice]) {
    let claims = node.preparer.prepared_claims().unwrap();
    assert_eq!(claims.keys().collect::<Vec<_>>(), [UID], "one claim in the checkpoint");
    assert_eq!(claims[UID].state, ClaimState::PrepareCompleted);
    assert_eq!(devices.len(), 1);
    let config = node.preparer.config();
    assert_eq!(
        files_in(&config.cdi_dir),
        [format!("gpu.deckhouse.io-claim_{UID}.json")],
        "one CDI spec"
    );
    let gpu = node.mock_gpu();
    match mode {
        Mode::Mig => {
            assert_eq!(
                node.instance_starts(),
                [2],
                "one MIG instance, at the allocated placement"
            );
            let record = claims[UID].devices[0]
                .mig_instance
                .clone()
                .expect("the instance is recorded");
            assert_eq!(gpu.gpu_instances[0].id, record.gpu_instance_id);
            assert!(gpu.mig_current);
        }
        _ => {
            assert!(gpu.gpu_instances.is_empty(), "no MIG instance");
            assert!(!gpu.mig_current, "MIG off for a whole card");
        }
    }
    let mps = matches!(mode, Mode::Mps | Mode::MpsStatic);
    assert_eq!(daemon_settles(node, mps), mps, "one MPS daemon for an MPS share");
    assert_eq!(
        node.static_pod_manifests().len(),
        usize::from(mode == Mode::MpsStatic),
        "the daemon's static Pod, when the kubelet runs it: {:?}",
        node.static_pod_manifests()
    );
    if mode == Mode::TimeSlicing {
        assert_eq!(node.time_slice(A30_UUID), Some(3), "the share's time slice is set");
    }
    let on_vfio: Vec<bool> = VFIO_FUNCTIONS
        .iter()
        .map(|function| node.driver_of(function).as_deref() == Some("vfio-pci"))
        .collect();
    assert_eq!(
        on_vfio,
        [mode == Mode::Vfio; 2],
        "only a VFIO claim's functions are on vfio-pci"
    );
    let payloads = files_in(&config.plugin_dir.join("vfio"));
    assert_eq!(payloads.len(), usize::from(mode == Mode::Vfio), "{payloads:?}");
}

/// Whether the card's MPS daemon runs, once it is `expected` or 2 s have passed. The fixture
/// kubelet, as the kubelet, replaces or removes a static Pod on its own next sync after its manifest
/// changes or goes (a 20 ms poll here), not before the prepare or unprepare returns: a daemon that
/// was starting when the crash's rollback sent `quit` goes only then, and a retried prepare can be
/// answered by it (the stand-in answers by its marker, not by the removed pipe directory) while
/// its successor starts. A daemon missing or left for good still fails.
fn daemon_settles(node: &Node, expected: bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let running = node.mps_daemon_running(A30_UUID);
        if running == expected || std::time::Instant::now() > deadline {
            return running;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Nothing left: no checkpoint entry or MIG record of ours, no CDI spec or payload, no MIG
/// instance and MIG off, no MPS daemon or its directory, the time slice back to Default, every
/// function back on its driver.
pub fn assert_clean(node: &Node, mode: Mode) {
    let data = checkpoint_data(node);
    assert!(
        data["claims"].as_object().is_none_or(|claims| claims.is_empty()),
        "no checkpoint entry: {data}"
    );
    assert!(data.get("migEnabledByNode").is_none(), "no MIG record left: {data}");
    assert!(data.get("migDisabledByNode").is_none(), "no MIG record left: {data}");
    let config = node.preparer.config();
    assert_eq!(files_in(&config.cdi_dir), Vec::<String>::new(), "no CDI spec");
    assert_eq!(
        files_in(&config.plugin_dir.join("vfio")),
        Vec::<String>::new(),
        "no QEMU payload"
    );
    let gpu = node.mock_gpu();
    assert!(gpu.gpu_instances.is_empty(), "no MIG instance: {:?}", gpu.gpu_instances);
    assert!(!gpu.mig_current && !gpu.mig_pending, "MIG mode off");
    assert!(!daemon_settles(node, false), "no MPS daemon");
    assert_eq!(
        node.static_pod_manifests(),
        Vec::<String>::new(),
        "no daemon's static Pod"
    );
    assert!(
        !config.plugin_dir.join("mps").join("0000:01:00.0").exists(),
        "no MPS directory"
    );
    assert!(
        matches!(node.time_slice(A30_UUID), None | Some(0)),
        "the time slice is back to Default: {:?}",
        node.time_slice(A30_UUID)
    );
    if mode == Mode::Vfio {
        assert_eq!(node.driver_of(VFIO_FUNCTIONS[0]).as_deref(), Some("nvidia"));
        assert_eq!(node.driver_of(VFIO_FUNCTIONS[1]).as_deref(), Some("snd_hda_intel"));
    }
}
