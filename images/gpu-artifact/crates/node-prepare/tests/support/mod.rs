//! An A30 node for the pipeline's public behaviour: the `a30-pcie` host
//! fixture and the mock libnvidia-ml of the same card, loaded through the
//! real NVIDIA backend; stand-ins for `nvidia-smi` and
//! `nvidia-cuda-mps-control` that log what they were asked; and, for VFIO,
//! the fixtures' kernel emulator.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dra_offers::OfferedDevice;
use gpu_api::opaque_config::SharingStrategy;
use gpu_vendor::{MigPlacement, PciAddress};
use host_fixtures::{HostTree, KernelEmulator, NamedHost, ToolStandIns};
use kubelet_plugin::ClaimRef;
use mock_nvml::state::GpuState;
use mock_nvml::test_support::{MockInstall, machine_fixture};
use node_prepare::{AllocatedDevice, NodePrepareConfig, NodePreparer, PrepareRequest, ReservedPod};
use static_pods::StaticPodRunner;

pub mod static_pods;
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use tempfile::TempDir;

pub const A30_UUID: &str = "GPU-010a3000-0000-4000-8000-a30000000001";
pub const A30_ADDRESS: &str = "0000:01:00.0";

pub struct Node {
    // First, so it stops its daemons before the host's files go.
    static_pods: Option<StaticPodRunner>,
    pub host: Arc<HostTree>,
    _mock_dir: TempDir,
    pub mock: MockInstall,
    pub preparer: NodePreparer,
    kernel: Option<KernelEmulator>,
}

impl Node {
    pub fn a30() -> Node {
        Node::on(NamedHost::A30Pcie)
    }

    /// `host` with the mock library of one A30 at 0000:01:00.0 (the vendor
    /// library answers only process and MIG questions for VFIO, so the
    /// RTX 4090 of `consumer-with-audio`, at the same address, passes for it).
    pub fn on(host: NamedHost) -> Node {
        let host = Arc::new(host.build());
        ToolStandIns::install(&host);
        let mock_dir = TempDir::new().unwrap();
        let mock = MockInstall::new(mock_dir.path(), &machine_fixture("a30.yaml")).unwrap();
        let preparer = preparer_at(host.root(), &mock.library_path());
        Node {
            host,
            _mock_dir: mock_dir,
            mock,
            preparer,
            kernel: None,
            static_pods: None,
        }
    }

    /// The same node with the kernel's driver binding emulated.
    pub fn with_kernel(mut self) -> Node {
        self.kernel = Some(KernelEmulator::start(self.host.clone()));
        self
    }

    /// What the stand-in tools were asked, one line per call.
    pub fn tool_calls(&self) -> Vec<String> {
        self.tools().calls()
    }

    /// Whether the stand-in MPS daemon for `uuid` runs (`-d` made its marker, `quit` removes it).
    pub fn mps_daemon_running(&self, uuid: &str) -> bool {
        self.tools().mps_daemon_running(uuid)
    }

    fn tools(&self) -> ToolStandIns {
        ToolStandIns::at(&self.host)
    }

    /// The time slice the stand-in `nvidia-smi` last set on the card `uuid`.
    pub fn time_slice(&self, uuid: &str) -> Option<u8> {
        self.tools().time_slice(uuid)
    }

    /// The driver bound to a PCI function of the fixture.
    pub fn driver_of(&self, address: &str) -> Option<String> {
        std::fs::read_link(self.host.path(format!("sys/bus/pci/devices/{address}/driver")))
            .ok()
            .and_then(|target| target.file_name().map(|name| name.to_string_lossy().into_owned()))
    }

    /// A new handler process on the same node: new backend, same files.
    pub fn restarted(&self) -> NodePreparer {
        preparer_at(self.host.root(), &self.mock.library_path())
    }

    /// The vendor library as someone else on the node uses it.
    pub fn backend(&self) -> NvidiaBackend {
        backend_at(&self.mock.library_path())
    }

    pub fn card(&self) -> PciAddress {
        A30_ADDRESS.parse().unwrap()
    }

    /// The mock's state of the A30 (its boot state when untouched).
    pub fn mock_gpu(&self) -> GpuState {
        let snapshot = self.mock.state().snapshot().unwrap();
        snapshot.gpus.values().next().cloned().unwrap_or_default()
    }

    /// Placement starts of the GPU instances on the card.
    pub fn instance_starts(&self) -> Vec<u32> {
        let mut starts: Vec<u32> = self
            .mock_gpu()
            .gpu_instances
            .iter()
            .map(|gi| gi.placement.start)
            .collect();
        starts.sort();
        starts
    }

    pub fn cdi_path(&self, uid: &str) -> PathBuf {
        self.preparer.config().cdi_spec_path(uid)
    }

    pub fn checkpoint_path(&self) -> PathBuf {
        self.preparer.config().checkpoint_path()
    }

    /// The checkpoint file's text; "" when there is none yet (nothing was ever recorded), any other
    /// failure fails the test.
    pub fn checkpoint_text(&self) -> String {
        let path = self.checkpoint_path();
        match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }

    pub fn cdi_json(&self, uid: &str) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.cdi_path(uid)).unwrap()).unwrap()
    }
}

pub fn backend_at(library: &Path) -> NvidiaBackend {
    NvidiaBackend::load(NvidiaBackendConfig {
        library_path: Some(library.to_path_buf()),
    })
    .expect("the backend loads the mock")
}

/// The preparer of the node at `root`, with the stand-in tools installed there.
pub fn preparer_at(root: &Path, library: &Path) -> NodePreparer {
    let tools = root.join(host_fixtures::STAND_INS_DIR);
    let config = NodePrepareConfig {
        nvidia_smi: tools.join("nvidia-smi"),
        mps_control: tools.join("nvidia-cuda-mps-control"),
        vfio_bind_timeout: std::time::Duration::from_secs(5),
        // A node with a static Pod directory runs the MPS daemons as static Pods.
        mps_static_pods: static_pods::config_of(root),
        ..NodePrepareConfig::new("w1", root)
    };
    NodePreparer::new(config, Arc::new(backend_at(library)))
}

pub fn claim(uid: &str) -> ClaimRef {
    ClaimRef {
        namespace: "default".into(),
        name: format!("claim-{uid}"),
        uid: uid.into(),
    }
}

pub fn physical_request(uid: &str) -> PrepareRequest {
    PrepareRequest {
        claim: claim(uid),
        devices: vec![AllocatedDevice {
            request: "gpu".into(),
            pool: "gpus/w1".into(),
            device: "gpu0".into(),
            share_id: None,
            share_percent: None,
            share_memory_bytes: None,
            config: None,
            vfio_allowed: false,
            admin_access: false,
            target: OfferedDevice::Physical {
                pci_address: A30_ADDRESS.parse().unwrap(),
                uuid: A30_UUID.into(),
                physical_gpu: "w1-a30-0".into(),
            },
        }],
        vfio_requested: false,
        pods: Vec::new(),
    }
}

/// A share of the A30's `strategy` offer with `share_percent`.
pub fn share_request(uid: &str, strategy: SharingStrategy, share_percent: u32) -> PrepareRequest {
    let mut request = physical_request(uid);
    let device = &mut request.devices[0];
    device.device = match strategy {
        SharingStrategy::Mps => "gpu0-mps".into(),
        _ => "gpu0-timeslicing".into(),
    };
    device.share_id = Some(format!("share-{uid}"));
    device.share_percent = Some(share_percent);
    device.target = OfferedDevice::SharedPhysical {
        pci_address: A30_ADDRESS.parse().unwrap(),
        uuid: A30_UUID.into(),
        physical_gpu: "w1-a30-0".into(),
        strategy,
    };
    request
}

/// The whole card at `address` for a virtual machine, asked for by the Pod annotation, reserved for Pod `vm-0`.
pub fn vfio_request(uid: &str, address: &str) -> PrepareRequest {
    let mut request = physical_request(uid);
    if let OfferedDevice::Physical { pci_address, .. } = &mut request.devices[0].target {
        *pci_address = address.parse().unwrap();
    }
    request.vfio_requested = true;
    request.devices[0].vfio_allowed = true;
    request.pods = vec![ReservedPod {
        name: "vm-0".into(),
        uid: "pod-uid-0".into(),
    }];
    request
}

/// One 2g.12gb device (profile 5) per placement start.
pub fn mig_request(uid: &str, starts: &[u32]) -> PrepareRequest {
    let devices = starts
        .iter()
        .map(|&start| AllocatedDevice {
            request: "mig".into(),
            pool: "gpus/w1".into(),
            device: format!("gpu0-mig-2g12gb-{start}"),
            share_id: None,
            share_percent: None,
            share_memory_bytes: None,
            config: None,
            vfio_allowed: false,
            admin_access: false,
            target: OfferedDevice::Mig {
                pci_address: A30_ADDRESS.parse().unwrap(),
                parent_uuid: A30_UUID.into(),
                physical_gpu: "w1-a30-0".into(),
                profile_id: 5,
                profile_name: "2g.12gb".into(),
                placement: MigPlacement { start, size: 2 },
            },
        })
        .collect();
    PrepareRequest {
        claim: claim(uid),
        devices,
        vfio_requested: false,
        pods: Vec::new(),
    }
}

/// The capability minors of `gpu<minor>/gi<gi>` and its `ci<ci>` in the
/// driver's static table (3 + 135 per GPU + 9 per GPU instance).
pub fn mig_minors(card_minor: u32, gi: u32, ci: u32) -> (u32, u32) {
    let gi_access = 3 + card_minor * 135 + gi * 9;
    (gi_access, gi_access + 1 + ci)
}

/// Set in a child process: `<host root>\n<mock library>` of the parent's node.
const CRASH_CHILD_ENV: &str = "NODE_PREPARE_TEST_CRASH_CHILD";

/// In a child started by [`crash_in_child`] (and only there): prepares `request` on the parent's
/// node, which the fault point must abort; never returns in a child.
pub fn prepare_in_child_if_asked(request: impl FnOnce() -> PrepareRequest) {
    let Ok(node) = std::env::var(CRASH_CHILD_ENV) else {
        return;
    };
    let (root, library) = node.split_once('\n').expect("root and library");
    let result = preparer_at(Path::new(root), Path::new(library)).prepare(&request());
    panic!("the fault point did not abort the prepare: {result:?}");
}

/// Runs `test` of this binary in a child process on `node`'s files with the fault point `point`
/// set; returns once the child died of it (the point kills its process with SIGKILL).
pub fn crash_in_child(test: &str, point: &str, node: &Node) {
    use std::os::unix::process::ExitStatusExt;
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(
            CRASH_CHILD_ENV,
            format!("{}\n{}", node.host.root().display(), node.mock.library_path().display()),
        )
        .env(node_prepare::FAULT_POINT_ENV, point)
        .output()
        .unwrap();
    assert_eq!(
        output.status.signal(),
        Some(9),
        "the child was not aborted at {point}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
