//! The mock's mutable state (MIG mode, instances, processes, injected
//! events) and the file that keeps it across processes.
//!
//! Every access takes a lock on `<state>.lock`, so concurrent processes (a
//! handler and a test injecting an Xid) never see half a write; writes go to
//! a temporary file renamed over the state, so a crash leaves the old state.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::machine::Card;
use crate::pci::PciBusId;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MockState {
    /// Source of GPU/compute instance serials: handles encode them, so a
    /// handle to a destroyed instance never matches a new one.
    #[serde(default = "first_serial")]
    pub next_serial: u64,
    #[serde(default = "first_serial")]
    pub next_event_seq: u64,
    #[serde(default)]
    pub gpus: BTreeMap<PciBusId, GpuState>,
    #[serde(default)]
    pub xid_events: Vec<XidEvent>,
}

fn first_serial() -> u64 {
    1
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuState {
    pub mig_current: bool,
    pub mig_pending: bool,
    #[serde(default)]
    pub gpu_instances: Vec<GpuInstanceState>,
    #[serde(default)]
    pub processes: Vec<ProcessState>,
    /// Processes that hold the card open without a compute context (DCGM's `nv-hostengine`,
    /// `nvidia-persistenced`): NVML's process lists do not show them, but like processes they keep
    /// a MIG mode change pending ("In use by another client").
    #[serde(default)]
    pub clients: Vec<ClientState>,
    /// The card fell off the bus: event waits and every query of the card report
    /// `NVML_ERROR_GPU_IS_LOST`.
    #[serde(default)]
    pub lost: bool,
    /// Uncorrectable memory errors since the driver loaded or the card was last reset (NVML's
    /// volatile counter); a reset clears them.
    #[serde(default)]
    pub uncorrectable_errors_volatile: u64,
    /// Uncorrectable memory errors over the card's life (NVML's aggregate counter).
    #[serde(default)]
    pub uncorrectable_errors_aggregate: u64,
    #[serde(default)]
    pub remapped_rows: RemappedRowsState,
    /// `nvmlDeviceGpuRecoveryAction_t`: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain
    /// and reset.
    #[serde(default)]
    pub recovery_action: u32,
}

/// Row remapping as `nvmlDeviceGetRemappedRows` reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemappedRowsState {
    pub correctable: u32,
    pub uncorrectable: u32,
    /// A remapping waits for the next reset.
    pub pending: bool,
    /// A remapping failed: a reset does not repair it.
    pub failure: bool,
}

impl GpuState {
    /// The state of a card nobody has touched yet: its boot-time MIG mode.
    pub fn initial(card: &Card) -> GpuState {
        GpuState {
            mig_current: card.mig_enabled_at_boot,
            mig_pending: card.mig_enabled_at_boot,
            ..GpuState::default()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub start: u32,
    pub size: u32,
}

impl Placement {
    pub fn overlaps(&self, other: &Placement) -> bool {
        self.start < other.start + other.size && other.start < self.start + self.size
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuInstanceState {
    pub serial: u64,
    pub id: u32,
    pub profile_id: u32,
    pub placement: Placement,
    #[serde(default)]
    pub compute_instances: Vec<ComputeInstanceState>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ComputeInstanceState {
    pub serial: u64,
    pub id: u32,
    pub profile_id: u32,
    pub placement: Placement,
    pub uuid: String,
}

/// A fake process with a compute context, added by tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessState {
    pub pid: u32,
    #[serde(default)]
    pub used_gpu_memory_bytes: u64,
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
    /// What `nvmlSystemGetProcessName` answers for the pid.
    #[serde(default)]
    pub name: Option<String>,
}

/// A process holding the card open without a compute context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientState {
    pub pid: u32,
    pub name: String,
}

/// An Xid that happened at `seq` (ordering across cards and processes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct XidEvent {
    pub seq: u64,
    pub pci_bus_id: PciBusId,
    pub xid: u64,
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
}

impl MockState {
    /// A card's state, created from its boot state on first touch.
    pub fn gpu_mut(&mut self, card: &Card) -> &mut GpuState {
        self.gpus
            .entry(card.pci_bus_id)
            .or_insert_with(|| GpuState::initial(card))
    }

    /// A card's state for reading; untouched cards read as booted.
    pub fn gpu(&self, card: &Card) -> GpuState {
        self.gpus
            .get(&card.pci_bus_id)
            .cloned()
            .unwrap_or_else(|| GpuState::initial(card))
    }

    pub fn take_serial(&mut self) -> u64 {
        let serial = self.next_serial.max(1);
        self.next_serial = serial + 1;
        serial
    }
}

/// The state file and its lock.
#[derive(Debug, Clone)]
pub struct StateStore {
    path: PathBuf,
}

impl StateStore {
    pub fn new(path: impl Into<PathBuf>) -> StateStore {
        StateStore { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the state under a shared lock.
    pub fn read<T>(&self, f: impl FnOnce(&MockState) -> T) -> io::Result<T> {
        let lock = self.lock_file()?;
        lock.lock_shared()?;
        let state = self.load()?;
        Ok(f(&state))
    }

    /// Reads, changes and writes the state under an exclusive lock. The state
    /// is written only when `f` changed it.
    pub fn update<T>(&self, f: impl FnOnce(&mut MockState) -> T) -> io::Result<T> {
        let lock = self.lock_file()?;
        lock.lock()?;
        let before = self.load()?;
        let mut state = before.clone();
        let result = f(&mut state);
        if state != before {
            self.store(&state)?;
        }
        Ok(result)
    }

    fn lock_file(&self) -> io::Result<File> {
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(PathBuf::from(lock_path))
    }

    fn load(&self) -> io::Result<MockState> {
        match std::fs::read(&self.path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(MockState::default()),
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", self.path.display()))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(MockState::default()),
            Err(e) => Err(e),
        }
    }

    fn store(&self, state: &MockState) -> io::Result<()> {
        let mut tmp_path = self.path.clone().into_os_string();
        tmp_path.push(format!(".tmp.{}", std::process::id()));
        let tmp_path = PathBuf::from(tmp_path);
        let mut tmp = File::create(&tmp_path)?;
        tmp.write_all(&serde_json::to_vec_pretty(state).map_err(io::Error::other)?)?;
        tmp.sync_all()?;
        std::fs::rename(&tmp_path, &self.path)
    }
}
