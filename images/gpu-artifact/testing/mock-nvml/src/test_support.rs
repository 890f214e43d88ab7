//! Helpers for tests: install the mock library with a machine description in
//! a directory, and change its state (processes, Xids, lost cards) the way
//! the outside world would.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::SystemTime;

use crate::machine::Machine;
use crate::pci::PciBusId;
use crate::session::{MACHINE_FILE_NAME, STATE_FILE_NAME};
use crate::state::{ClientState, MockState, ProcessState, StateStore, XidEvent};

mod health_faults;

pub use health_faults::{
    RECOVERY_GPU_RESET, RECOVERY_NODE_REBOOT, RECOVERY_NONE, ResetRefused, recovery_action_after_xid,
};

/// The name NVML consumers dlopen.
pub const LIBRARY_FILE_NAME: &str = "libnvidia-ml.so.1";
/// Overrides where the built cdylib is taken from.
pub const CDYLIB_ENV: &str = "MOCK_NVML_CDYLIB";

/// The machine description fixtures shipped with this crate.
pub fn machines_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("machines")
}

/// A fixture by file name, e.g. `machine_fixture("a30.yaml")`.
pub fn machine_fixture(file_name: &str) -> PathBuf {
    machines_dir().join(file_name)
}

/// The built mock library (`libmock_nvml.so`).
///
/// Cargo builds the cdylib next to the rlib whenever a crate depends on
/// `mock-nvml`, in `<target>/<profile>/deps/`; `cargo build -p mock-nvml`
/// puts one in `<target>/<profile>/`. The newest wins. When neither exists
/// (a test binary built without this dependency graph) it runs
/// `cargo build -p mock-nvml` into the same target directory.
pub fn cdylib_path() -> io::Result<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| locate_or_build().map_err(|e| e.to_string()))
        .clone()
        .map_err(io::Error::other)
}

fn locate_or_build() -> io::Result<PathBuf> {
    if let Some(path) = std::env::var_os(CDYLIB_ENV) {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe()?;
    let deps = exe
        .parent()
        .ok_or_else(|| io::Error::other("test binary has no directory"))?;
    // Test binaries live in <profile>/deps, examples (the demo) in <profile>/examples.
    let profile_dir = if deps.ends_with("deps") || deps.ends_with("examples") {
        deps.parent().unwrap_or(deps)
    } else {
        deps
    };
    let candidates = [deps.join("libmock_nvml.so"), profile_dir.join("libmock_nvml.so")];
    if let Some(newest) = newest_existing(&candidates) {
        return Ok(newest);
    }
    let target_dir = profile_dir.parent().unwrap_or(profile_dir);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let mut build = Command::new(cargo);
    build
        .args(["build", "--lib", "-p", "mock-nvml", "--manifest-path"])
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir);
    if profile_dir.ends_with("release") {
        build.arg("--release");
    }
    let status = build.status()?;
    if !status.success() {
        return Err(io::Error::other(format!("cargo build -p mock-nvml failed: {status}")));
    }
    newest_existing(&candidates)
        .ok_or_else(|| io::Error::other("cargo built mock-nvml but no libmock_nvml.so appeared"))
}

fn newest_existing(candidates: &[PathBuf]) -> Option<PathBuf> {
    candidates
        .iter()
        .filter_map(|path| {
            let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
            Some((modified, path.clone()))
        })
        .max_by_key(|(modified, _): &(SystemTime, PathBuf)| *modified)
        .map(|(_, path)| path)
}

/// The mock installed in a directory as `libnvidia-ml.so.1`, with its
/// machine description and state file beside it.
///
/// The library is copied, not linked: the dynamic loader shares one copy
/// of a file between every `dlopen` in a process, so separate copies are
/// what let parallel tests in one process use different machines.
#[derive(Debug, Clone)]
pub struct MockInstall {
    dir: PathBuf,
    state: MockStateFile,
}

impl MockInstall {
    /// Installs into `dir` (which must exist) the machine described by
    /// `machine_file`.
    pub fn new(dir: &Path, machine_file: &Path) -> io::Result<MockInstall> {
        std::fs::copy(cdylib_path()?, dir.join(LIBRARY_FILE_NAME))?;
        let machine_text = with_absolute_includes(machine_file)?;
        let machine_path = dir.join(MACHINE_FILE_NAME);
        std::fs::write(&machine_path, machine_text)?;
        let state = MockStateFile::open(&machine_path, &dir.join(STATE_FILE_NAME))?;
        Ok(MockInstall {
            dir: dir.to_path_buf(),
            state,
        })
    }

    pub fn library_path(&self) -> PathBuf {
        self.dir.join(LIBRARY_FILE_NAME)
    }

    pub fn state(&self) -> &MockStateFile {
        &self.state
    }
}

/// The description text with `include` paths made absolute, so it still
/// resolves after being copied elsewhere.
fn with_absolute_includes(machine_file: &Path) -> io::Result<String> {
    let text = std::fs::read_to_string(machine_file)?;
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(io::Error::other)?;
    let base = machine_file.parent().unwrap_or(Path::new("."));
    if let Some(includes) = doc.get_mut("include").and_then(|v| v.as_sequence_mut()) {
        for include in includes.iter_mut() {
            if let Some(relative) = include.as_str() {
                *include = serde_yaml::Value::String(base.join(relative).to_string_lossy().into_owned());
            }
        }
    }
    serde_yaml::to_string(&doc).map_err(io::Error::other)
}

/// The state of a mock machine, as tests change it from outside.
#[derive(Debug, Clone)]
pub struct MockStateFile {
    machine: std::sync::Arc<Machine>,
    store: StateStore,
}

impl MockStateFile {
    /// The state file `state_file` of the machine described by `machine_file`
    /// (for a mock configured through `MOCK_NVML_MACHINE`/`MOCK_NVML_STATE`).
    pub fn open(machine_file: &Path, state_file: &Path) -> io::Result<MockStateFile> {
        let machine = Machine::load(machine_file).map_err(io::Error::other)?;
        Ok(MockStateFile {
            machine: std::sync::Arc::new(machine),
            store: StateStore::new(state_file),
        })
    }

    pub fn path(&self) -> &Path {
        self.store.path()
    }

    pub fn snapshot(&self) -> io::Result<MockState> {
        self.store.read(MockState::clone)
    }

    /// Starts a fake compute process on a card (on a MIG instance when the
    /// ids are set).
    pub fn add_process(&self, pci_bus_id: &str, process: ProcessState) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.processes.push(process))
    }

    pub fn remove_process(&self, pci_bus_id: &str, pid: u32) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.processes.retain(|p| p.pid != pid))
    }

    /// A process starts holding the card open without a compute context (DCGM's nv-hostengine).
    pub fn add_client(&self, pci_bus_id: &str, client: ClientState) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.clients.push(client))
    }

    pub fn remove_client(&self, pci_bus_id: &str, pid: u32) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.clients.retain(|c| c.pid != pid))
    }

    /// Marks a card as fallen off the bus (or back).
    pub fn set_lost(&self, pci_bus_id: &str, lost: bool) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.lost = lost)
    }

    /// Records an Xid on a card now; waiting event sets deliver it. Like the driver, it raises the
    /// card's recovery action where the Xid's resolution asks for a reset or a reboot
    /// ([`recovery_action_after_xid`]).
    pub fn inject_xid(
        &self,
        pci_bus_id: &str,
        xid: u64,
        gpu_instance_id: Option<u32>,
        compute_instance_id: Option<u32>,
    ) -> io::Result<()> {
        let pci_bus_id = self.known_card(pci_bus_id)?;
        let index = self.machine.card_index(&pci_bus_id).unwrap_or_default();
        let card = self.machine.cards[index].clone();
        self.store.update(|state| {
            if let Some(action) = recovery_action_after_xid(xid) {
                let gpu = state.gpu_mut(&card);
                gpu.recovery_action = gpu.recovery_action.max(action);
            }
            let seq = state.next_event_seq.max(1);
            state.next_event_seq = seq + 1;
            state.xid_events.push(XidEvent {
                seq,
                pci_bus_id,
                xid,
                gpu_instance_id,
                compute_instance_id,
            });
        })
    }

    fn known_card(&self, pci_bus_id: &str) -> io::Result<PciBusId> {
        let wanted: PciBusId = pci_bus_id.parse().map_err(io::Error::other)?;
        self.machine
            .card_index(&wanted)
            .map(|_| wanted)
            .ok_or_else(|| io::Error::other(format!("no card {wanted} in the machine description")))
    }

    fn update_gpu(&self, pci_bus_id: &str, change: impl FnOnce(&mut crate::state::GpuState)) -> io::Result<()> {
        let wanted = self.known_card(pci_bus_id)?;
        let index = self.machine.card_index(&wanted).unwrap_or_default();
        let card = &self.machine.cards[index];
        self.store.update(|state| change(state.gpu_mut(card)))
    }
}
