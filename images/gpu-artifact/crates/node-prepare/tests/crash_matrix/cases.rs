//! One case of the crash matrix: the operation that reaches the point (with what must exist
//! before it), the child process that stops there and is killed, and the restart and retry that
//! must leave the node exactly right.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use gpu_api::opaque_config::{
    GpuConfig, GpuSharing, OpaqueConfig, SharingStrategy, TimeSliceInterval, TimeSlicingConfig,
};
use host_fixtures::NamedHost;
use node_prepare::{FAULT_POINT_ENV, FAULT_REACHED_ENV, PrepareRequest};

use crate::end_state::{assert_clean, assert_prepared_once};
use crate::support::{Node, claim, mig_request, physical_request, preparer_at, share_request, vfio_request};

/// Set in a child: `<operation>\n<mode>\n<host root>\n<mock library>`.
pub const CHILD_ENV: &str = "NODE_PREPARE_CRASH_MATRIX_CHILD";
const TEST: &str = "a_kill_at_every_point_of_every_mode_leaves_the_node_exactly_right";
pub const UID: &str = "uid-crash";
/// A child that neither reaches its point nor ends within this is a hang, which is a failure.
const CHILD_DEADLINE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Physical,
    Mig,
    Mps,
    /// An MPS share whose daemon runs as a static Pod of the kubelet.
    MpsStatic,
    TimeSlicing,
    Vfio,
}

impl Mode {
    pub const ALL: [Mode; 6] = [
        Mode::Physical,
        Mode::Mig,
        Mode::Mps,
        Mode::MpsStatic,
        Mode::TimeSlicing,
        Mode::Vfio,
    ];

    fn from_name(name: &str) -> Mode {
        Mode::ALL
            .into_iter()
            .find(|mode| format!("{mode:?}") == name)
            .expect("a mode name")
    }

    /// The node the mode runs on: the A30 host, or for VFIO a card with its audio function in one
    /// IOMMU group and the kernel's binding emulated.
    pub fn node(self) -> Node {
        match self {
            Mode::Vfio => Node::on(NamedHost::ConsumerWithAudio).with_kernel(),
            Mode::MpsStatic => Node::a30().with_static_pods(),
            _ => Node::a30(),
        }
    }

    pub fn request(self) -> PrepareRequest {
        match self {
            Mode::Physical => physical_request(UID),
            Mode::Mig => mig_request(UID, &[2]),
            Mode::Mps | Mode::MpsStatic => share_request(UID, SharingStrategy::Mps, 50),
            Mode::TimeSlicing => {
                // A slice other than Default, so a leaked setting shows.
                let mut request = share_request(UID, SharingStrategy::TimeSlicing, 50);
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
            }
            Mode::Vfio => vfio_request(UID, "0000:01:00.0"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// Killed at the point; after the restart and the retry the node was exactly right.
    KilledAndRecovered,
    /// The mode never passes the point (the operation ended without reaching it; the node was
    /// still exactly right afterwards).
    NotReached,
    Failed,
}

impl Outcome {
    pub fn cell(self) -> &'static str {
        match self {
            Outcome::KilledAndRecovered => "killed, recovered",
            Outcome::NotReached => "n/a",
            Outcome::Failed => "FAILED",
        }
    }
}

/// In a child process (and only there): runs the operation its parent asked for, which the fault
/// point stops; returns `true` when this process is such a child.
pub fn run_child_if_asked() -> bool {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return false;
    };
    let parts: Vec<&str> = spec.split('\n').collect();
    let [operation, mode, root, library] = parts[..] else {
        panic!("bad child spec {spec:?}");
    };
    let preparer = preparer_at(Path::new(root), Path::new(library));
    let mode = Mode::from_name(mode);
    let result = match operation {
        "prepare" => preparer.prepare(&mode.request()).map(|_| ()),
        "unprepare" => preparer.unprepare(&claim(UID)),
        "reconcile" => preparer.reconcile().map(|_| ()),
        other => panic!("unknown operation {other}"),
    };
    // The point was not on this path: the operation ended; an error here fails the case.
    result.unwrap();
    true
}

/// Runs one case and checks the node afterwards; panics with what was wrong.
pub fn run_case(mode: Mode, point: &str) -> Outcome {
    let node = mode.node();
    let (operation, faults) = if point.starts_with("prepare/undo/") {
        // Every undo runs when the last step's fault point fails.
        (
            "prepare",
            format!("prepare/after/record-prepare-completed=fail,{point}"),
        )
    } else if point.starts_with("prepare/") {
        ("prepare", point.to_owned())
    } else if point.starts_with("unprepare/") {
        node.preparer
            .prepare(&mode.request())
            .expect("the claim prepares before its unprepare");
        ("unprepare", point.to_owned())
    } else {
        // Rollback and reconciliation need a prepare a crash left half-done: every side effect
        // made, the claim not yet recorded complete.
        let crashed = run_child(&node, "prepare", mode, "prepare/after/write-cdi-spec");
        assert!(crashed, "the setup crash was not reached");
        ("reconcile", point.to_owned())
    };
    let killed = run_child(&node, operation, mode, &faults);

    // A new handler: reconciliation at start, then the kubelet's retry.
    let restarted = node.restarted();
    let report = restarted.reconcile().expect("reconciliation after the restart");
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    if operation != "unprepare" {
        let devices = restarted
            .prepare(&mode.request())
            .expect("the kubelet's retry prepares the claim");
        assert_prepared_once(&node, mode, &devices);
        let again = restarted.prepare(&mode.request()).expect("a repeated prepare");
        assert_eq!(again, devices, "a repeated prepare returns the same devices");
    }
    restarted.unprepare(&claim(UID)).expect("the kubelet's unprepare");
    assert_clean(&node, mode);
    if killed {
        Outcome::KilledAndRecovered
    } else {
        Outcome::NotReached
    }
}

/// Runs `operation` in a child on `node`'s files with `faults`; returns `true` once it stopped at
/// its point and was killed with SIGKILL, `false` when it ended without reaching it.
fn run_child(node: &Node, operation: &str, mode: Mode, faults: &str) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let marker = node.host.path("fault-point-reached");
    let _ = std::fs::remove_file(&marker);
    let log = node.host.path(format!("child-{operation}.log"));
    let spec = format!(
        "{operation}\n{mode:?}\n{}\n{}",
        node.host.root().display(),
        node.mock.library_path().display()
    );
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec)
        .env(FAULT_POINT_ENV, faults)
        .env(FAULT_REACHED_ENV, &marker)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        if marker.exists() {
            child.kill().unwrap();
            let status = child.wait().unwrap();
            assert_eq!(status.signal(), Some(9), "the child at {faults} died of SIGKILL");
            return true;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(status.success(), "the child at {faults} failed ({status}):\n{said}");
            return false;
        }
        if started.elapsed() > CHILD_DEADLINE {
            let _ = child.kill();
            panic!("the child at {faults} neither reached its point nor ended");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
