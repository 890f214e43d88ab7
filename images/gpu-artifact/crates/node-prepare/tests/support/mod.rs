//! An A30 node for the pipeline's public behaviour: the `a30-pcie` host
//! fixture and the mock libnvidia-ml of the same card, loaded through the
//! real NVIDIA backend.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dra_offers::OfferedDevice;
use gpu_vendor::{MigPlacement, PciAddress};
use host_fixtures::{HostTree, NamedHost};
use kubelet_plugin::ClaimRef;
use mock_nvml::state::GpuState;
use mock_nvml::test_support::{MockInstall, machine_fixture};
use node_prepare::{AllocatedDevice, NodePrepareConfig, NodePreparer, PrepareRequest};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use tempfile::TempDir;

pub const A30_UUID: &str = "GPU-010a3000-0000-4000-8000-a30000000001";
pub const A30_ADDRESS: &str = "0000:01:00.0";

pub struct Node {
    pub host: HostTree,
    _mock_dir: TempDir,
    pub mock: MockInstall,
    pub preparer: NodePreparer,
}

impl Node {
    pub fn a30() -> Node {
        let host = NamedHost::A30Pcie.build();
        let mock_dir = TempDir::new().unwrap();
        let mock = MockInstall::new(mock_dir.path(), &machine_fixture("a30.yaml")).unwrap();
        let preparer = preparer_at(host.root(), &mock.library_path());
        Node {
            host,
            _mock_dir: mock_dir,
            mock,
            preparer,
        }
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

    pub fn checkpoint_text(&self) -> String {
        std::fs::read_to_string(self.checkpoint_path()).unwrap_or_default()
    }

    pub fn cdi_json(&self, uid: &str) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.cdi_path(uid)).unwrap()).unwrap()
    }
}

pub fn backend_at(library: &Path) -> NvidiaBackend {
    NvidiaBackend::load(NvidiaBackendConfig {
        library_path: Some(library.to_path_buf()),
        ..NvidiaBackendConfig::default()
    })
    .expect("the backend loads the mock")
}

pub fn preparer_at(root: &Path, library: &Path) -> NodePreparer {
    NodePreparer::new(NodePrepareConfig::new("w1", root), Arc::new(backend_at(library)))
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
            target: OfferedDevice::Physical {
                pci_address: A30_ADDRESS.parse().unwrap(),
                uuid: A30_UUID.into(),
                physical_gpu: "w1-a30-0".into(),
            },
        }],
    }
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
    }
}

/// The capability minors of `gpu<minor>/gi<gi>` and its `ci<ci>` in the
/// driver's static table (3 + 135 per GPU + 9 per GPU instance).
pub fn mig_minors(card_minor: u32, gi: u32, ci: u32) -> (u32, u32) {
    let gi_access = 3 + card_minor * 135 + gi * 9;
    (gi_access, gi_access + 1 + ci)
}
