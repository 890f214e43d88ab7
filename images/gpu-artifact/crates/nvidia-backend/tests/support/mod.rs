//! A mock node for backend tests: the mock libnvidia-ml installed in a
//! temporary directory with a machine description, and the backend loaded
//! from it.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;

use gpu_vendor::PciAddress;
use mock_nvml::machine::{Card, Machine};
use mock_nvml::test_support::{MockInstall, MockStateFile, machine_fixture};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use tempfile::TempDir;

/// The single-card fixtures, one per supported model.
pub const SINGLE_CARD_FIXTURES: [&str; 5] = [
    "a30.yaml",
    "a100-sxm4-40gb.yaml",
    "a100-sxm4-80gb.yaml",
    "h100-sxm5-80gb.yaml",
    "h100-pcie.yaml",
];

pub struct MockNode {
    _dir: TempDir,
    pub install: MockInstall,
    pub machine: Machine,
}

impl MockNode {
    /// A node described by a fixture of `testing/mock-nvml/machines`.
    pub fn from_fixture(file_name: &str) -> MockNode {
        Self::from_machine_file(machine_fixture(file_name), None)
    }

    /// A node described by `yaml`, which may include fixtures by name.
    pub fn from_yaml(yaml: &str) -> MockNode {
        let dir = TempDir::new().expect("temp dir");
        let path = dir.path().join("node.yaml");
        let yaml = yaml.replace(
            "FIXTURES/",
            &format!("{}/", mock_nvml::test_support::machines_dir().display()),
        );
        std::fs::write(&path, yaml).expect("write machine description");
        Self::from_machine_file(path, Some(dir))
    }

    fn from_machine_file(path: PathBuf, description_dir: Option<TempDir>) -> MockNode {
        let dir = TempDir::new().expect("temp dir");
        let install = MockInstall::new(dir.path(), &path).expect("install mock libnvidia-ml");
        let machine = Machine::load(&path).expect("machine description");
        drop(description_dir);
        MockNode {
            _dir: dir,
            install,
            machine,
        }
    }

    pub fn backend(&self) -> NvidiaBackend {
        NvidiaBackend::load(NvidiaBackendConfig {
            library_path: Some(self.install.library_path()),
        })
        .expect("backend loads the mock")
    }

    pub fn state(&self) -> &MockStateFile {
        self.install.state()
    }

    pub fn card(&self, index: usize) -> &Card {
        &self.machine.cards[index]
    }

    /// The PCI address of card `index` as the port spells it.
    pub fn pci(&self, index: usize) -> PciAddress {
        self.card(index)
            .pci_bus_id
            .to_string()
            .parse()
            .expect("fixture PCI address")
    }
}
