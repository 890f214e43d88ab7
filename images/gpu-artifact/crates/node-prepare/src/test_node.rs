//! A node for unit tests: the A30 host fixture and the mock libnvidia-ml of
//! the same A30, loaded through the real NVIDIA backend.

use dra_offers::OfferedDevice;
use gpu_vendor::{MigPlacement, PciAddress};
use host_fixtures::{HostTree, NamedHost};
use kubelet_plugin::ClaimRef;
use mock_nvml::state::GpuState;
use mock_nvml::test_support::{MockInstall, machine_fixture};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use tempfile::TempDir;

use crate::checkpoint::CheckpointStore;
use crate::config::NodePrepareConfig;
use crate::request::{AllocatedDevice, PrepareRequest};
use crate::steps::PrepareRun;

pub(crate) const A30_UUID: &str = "GPU-010a3000-0000-4000-8000-a30000000001";

pub(crate) struct TestNode {
    pub host: HostTree,
    _mock_dir: TempDir,
    pub mock: MockInstall,
    pub backend: NvidiaBackend,
    pub config: NodePrepareConfig,
    pub store: CheckpointStore,
    pub card: PciAddress,
}

impl TestNode {
    pub fn a30() -> TestNode {
        let host = NamedHost::A30Pcie.build();
        let mock_dir = TempDir::new().unwrap();
        let mock = MockInstall::new(mock_dir.path(), &machine_fixture("a30.yaml")).unwrap();
        let backend = NvidiaBackend::load(NvidiaBackendConfig {
            library_path: Some(mock.library_path()),
            ..NvidiaBackendConfig::default()
        })
        .unwrap();
        let config = NodePrepareConfig::new("w1", host.root());
        let store = CheckpointStore::new(config.checkpoint_path(), config.boot_id_path());
        TestNode {
            host,
            _mock_dir: mock_dir,
            mock,
            backend,
            config,
            store,
            card: "0000:01:00.0".parse().unwrap(),
        }
    }

    pub fn run<'a>(&'a self, request: &'a PrepareRequest) -> PrepareRun<'a> {
        PrepareRun::new(&self.config, &self.backend, &self.store, request)
    }

    pub fn physical_request(&self, uid: &str) -> PrepareRequest {
        self.request(
            uid,
            vec![AllocatedDevice {
                request: "gpu".into(),
                pool: "gpus/w1".into(),
                device: "gpu0".into(),
                share_id: None,
                target: OfferedDevice::Physical {
                    pci_address: self.card,
                    uuid: A30_UUID.into(),
                    physical_gpu: "w1-a30-0".into(),
                },
            }],
        )
    }

    /// 2g.12gb devices (profile 5) at the given placement starts.
    pub fn mig_request(&self, uid: &str, starts: &[u32]) -> PrepareRequest {
        let devices = starts
            .iter()
            .map(|&start| AllocatedDevice {
                request: "mig".into(),
                pool: "gpus/w1".into(),
                device: format!("gpu0-mig-2g12gb-{start}"),
                share_id: None,
                target: OfferedDevice::Mig {
                    pci_address: self.card,
                    parent_uuid: A30_UUID.into(),
                    physical_gpu: "w1-a30-0".into(),
                    profile_id: 5,
                    profile_name: "2g.12gb".into(),
                    placement: MigPlacement { start, size: 2 },
                },
            })
            .collect();
        self.request(uid, devices)
    }

    fn request(&self, uid: &str, devices: Vec<AllocatedDevice>) -> PrepareRequest {
        PrepareRequest {
            claim: ClaimRef {
                namespace: "default".into(),
                name: uid.into(),
                uid: uid.into(),
            },
            devices,
        }
    }

    /// The mock's state of the A30 (its boot state when untouched).
    pub fn mock_gpu(&self) -> GpuState {
        let snapshot = self.mock.state().snapshot().unwrap();
        snapshot.gpus.values().next().cloned().unwrap_or_default()
    }
}
