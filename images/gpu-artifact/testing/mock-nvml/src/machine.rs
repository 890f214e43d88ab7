//! The machine description: which cards a mock node has and what each model
//! is (names, memory, power, MIG profile tables with placements).
//!
//! A description file (YAML or JSON) has `models` (each with the source its
//! values come from) and `gpus` (cards keyed by PCI bus id, naming a model).
//! `include` pulls the models of other description files, so a multi-card
//! node reuses the single-card fixtures instead of copying their tables.
//!
//! NVLink: a model says how many links its cards have (`nvlinkLinks`, none: the
//! card has no NVLink and NVML answers `NVML_ERROR_NOT_SUPPORTED`); a card lists
//! what its links reach, in link order (`nvlinks`: another card, or an NVSwitch
//! of the machine's `nvswitches`); its other links are inactive, as on a PCIe
//! card without a bridge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use crate::pci::PciBusId;

/// A description file as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MachineFile {
    #[serde(default)]
    pub include: Vec<PathBuf>,
    /// `false` makes `nvmlInit` fail with `NVML_ERROR_DRIVER_NOT_LOADED`.
    #[serde(default = "yes")]
    pub driver_loaded: bool,
    #[serde(default = "default_driver_version")]
    pub driver_version: String,
    /// `nvmlSystemGetCudaDriverVersion_v2` value (major*1000 + minor*10).
    #[serde(default = "default_cuda_driver_version")]
    pub cuda_driver_version: i32,
    /// Prepended to profile names in the v2/v3 profile info `name` field.
    /// The exact NVML string is unconfirmed (mig-profiles.md section 7), so the
    /// default is the bare nvidia-smi name and tests can try `"MIG "`.
    #[serde(default)]
    pub profile_name_prefix: String,
    #[serde(default)]
    pub models: BTreeMap<String, GpuModel>,
    #[serde(default)]
    pub gpus: Vec<GpuCard>,
    /// Xid events every event set sees right after a card is registered.
    #[serde(default)]
    pub xid_events: Vec<XidEventSpec>,
    /// Where the process looks for the cards' device nodes, as the real library does: a card is
    /// enumerated only when `<deviceNodes>/nvidia<minor>` exists, and a MIG device only when its GPU
    /// and compute instance capability nodes (`<deviceNodes>/nvidia-caps/nvidia-cap<minor>`) exist
    /// too. Absent: every card and MIG device is seen (processes of the simulated nodes have none).
    #[serde(default)]
    pub device_nodes: Option<PathBuf>,
    /// The NVSwitches of the board, by PCI bus id: what an NVLink of a card may reach besides
    /// another card.
    #[serde(default)]
    pub nvswitches: Vec<PciBusId>,
}

fn yes() -> bool {
    true
}

fn default_driver_version() -> String {
    "580.76.05".to_owned()
}

fn default_cuda_driver_version() -> i32 {
    13000
}

/// One GPU model: everything NVML reports that does not change at run time.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuModel {
    /// Where the values come from (labels of mig-profiles.md section 1).
    pub source: String,
    pub name: String,
    /// `nvmlDeviceArchitecture_t` value: 7 Ampere, 9 Hopper.
    pub architecture: u32,
    pub compute_capability: [i32; 2],
    pub board_part_number: String,
    pub pci_device_id: u32,
    #[serde(default)]
    pub pci_sub_system_id: u32,
    #[serde(rename = "memoryTotalMiB")]
    pub memory_total_mib: u64,
    #[serde(default)]
    #[serde(rename = "memoryReservedMiB")]
    pub memory_reserved_mib: u64,
    pub power: PowerSpec,
    /// Absent for a card without MIG.
    #[serde(default)]
    pub mig: Option<MigSpec>,
    /// NVLink links of the card (`NVML_NVLINK_MAX_LINKS` at most); 0: no NVLink.
    #[serde(default)]
    pub nvlink_links: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PowerSpec {
    pub min_mw: u32,
    pub max_mw: u32,
    pub limit_mw: u32,
    pub enforced_mw: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MigSpec {
    /// Compute slices of the full card (7 on A100/H100, 4 on A30): the
    /// maximum number of MIG devices.
    pub compute_slices: u32,
    pub gpu_instance_profiles: Vec<GpuInstanceProfileSpec>,
}

impl MigSpec {
    pub fn profile_by_id(&self, id: u32) -> Option<&GpuInstanceProfileSpec> {
        self.gpu_instance_profiles.iter().find(|p| p.id == id)
    }

    pub fn profile_by_index(&self, index: u32) -> Option<&GpuInstanceProfileSpec> {
        self.gpu_instance_profiles.iter().find(|p| p.index == index)
    }

    /// The profile spanning the whole card: the engine budget all instances share.
    pub fn full_profile(&self) -> Option<&GpuInstanceProfileSpec> {
        self.gpu_instance_profiles.iter().max_by_key(|p| p.placements.size)
    }
}

/// One `nvidia-smi mig -lgip` row plus its `-lgipp` placements.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuInstanceProfileSpec {
    /// The `NVML_GPU_INSTANCE_PROFILE_*` index.
    pub index: u32,
    /// The profile id (`nvidia-smi` ID column).
    pub id: u32,
    pub name: String,
    #[serde(rename = "memoryMiB")]
    pub memory_mib: u64,
    pub slice_count: u32,
    pub max_instances: u32,
    pub multiprocessors: u32,
    pub copy_engines: u32,
    pub decoders: u32,
    pub encoders: u32,
    pub jpeg: u32,
    pub ofa: u32,
    #[serde(default)]
    pub p2p: bool,
    pub placements: PlacementSpec,
}

/// `{starts}:size` as `nvidia-smi mig -lgipp` prints it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementSpec {
    pub starts: Vec<u32>,
    pub size: u32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuCard {
    pub pci_bus_id: PciBusId,
    pub model: String,
    pub uuid: String,
    /// MIG mode at boot (Ampere keeps it in the InfoROM across reboots).
    #[serde(default)]
    pub mig_enabled: bool,
    /// What the card's links reach, in link order from link 0.
    #[serde(default)]
    pub nvlinks: Vec<crate::nvlink_links::NvLinkSpec>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct XidEventSpec {
    pub pci_bus_id: PciBusId,
    pub xid: u64,
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
    #[serde(default)]
    pub compute_instance_id: Option<u32>,
}

/// A loaded description with every card's model resolved.
#[derive(Debug, Clone)]
pub struct Machine {
    pub driver_loaded: bool,
    pub driver_version: String,
    pub cuda_driver_version: i32,
    pub profile_name_prefix: String,
    pub cards: Vec<Card>,
    pub xid_events: Vec<XidEventSpec>,
    pub device_nodes: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Card {
    pub pci_bus_id: PciBusId,
    /// The device minor (`/dev/nvidia<minor>`): the card's place in PCI bus order among all the
    /// machine's cards, as the driver numbers them at probe.
    pub minor: u32,
    pub uuid: String,
    pub mig_enabled_at_boot: bool,
    pub model: Arc<GpuModel>,
    /// The remote end of each active link, from link 0; later links are inactive.
    pub nvlink_remotes: Vec<PciBusId>,
}

impl Machine {
    /// Reads a description file and the files it includes.
    pub fn load(path: &Path) -> Result<Machine, String> {
        let file = read_file(path)?;
        let mut models = BTreeMap::new();
        collect_models(path, &file, &mut models, 0)?;
        let mut cards: Vec<Card> = Vec::with_capacity(file.gpus.len());
        for gpu in &file.gpus {
            let model = models.get(&gpu.model).ok_or_else(|| {
                format!(
                    "{}: GPU {} names unknown model {:?}",
                    path.display(),
                    gpu.pci_bus_id,
                    gpu.model
                )
            })?;
            if cards.iter().any(|c| c.pci_bus_id == gpu.pci_bus_id) {
                return Err(format!(
                    "{}: PCI bus id {} listed twice",
                    path.display(),
                    gpu.pci_bus_id
                ));
            }
            cards.push(Card {
                pci_bus_id: gpu.pci_bus_id,
                minor: 0,
                uuid: gpu.uuid.clone(),
                mig_enabled_at_boot: gpu.mig_enabled,
                model: Arc::clone(model),
                nvlink_remotes: gpu
                    .nvlinks
                    .iter()
                    .flat_map(|l| std::iter::repeat_n(l.remote, l.links as usize))
                    .collect(),
            });
        }
        crate::nvlink_links::check(path, &file.nvswitches, &cards)?;
        // NVML enumerates devices in PCI bus order.
        cards.sort_by_key(|c| c.pci_bus_id);
        for (minor, card) in cards.iter_mut().enumerate() {
            card.minor = minor as u32;
        }
        Ok(Machine {
            driver_loaded: file.driver_loaded,
            driver_version: file.driver_version,
            cuda_driver_version: file.cuda_driver_version,
            profile_name_prefix: file.profile_name_prefix,
            cards,
            xid_events: file.xid_events,
            device_nodes: file.device_nodes,
        })
    }

    /// Keeps only the cards this process can open (see [`MachineFile::device_nodes`]).
    pub fn retain_visible_cards(&mut self) {
        if let Some(dir) = &self.device_nodes {
            self.cards
                .retain(|card| dir.join(format!("nvidia{}", card.minor)).exists());
        }
    }

    /// Whether this process can open the MIG device of GPU instance `gi` and compute instance `ci`
    /// on `card`: both capability nodes are present (always, without [`MachineFile::device_nodes`]).
    pub fn mig_device_visible(&self, card: &Card, gi: u32, ci: u32) -> bool {
        let Some(dir) = &self.device_nodes else { return true };
        let (gi_minor, ci_minor) = mig_capability_minors(card.minor, gi, ci);
        let cap = |minor: u32| dir.join(format!("nvidia-caps/nvidia-cap{minor}")).exists();
        cap(gi_minor) && cap(ci_minor)
    }

    pub fn card_index(&self, pci_bus_id: &PciBusId) -> Option<usize> {
        self.cards.iter().position(|c| &c.pci_bus_id == pci_bus_id)
    }
}

fn read_file(path: &Path) -> Result<MachineFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn collect_models(
    path: &Path,
    file: &MachineFile,
    models: &mut BTreeMap<String, Arc<GpuModel>>,
    depth: usize,
) -> Result<(), String> {
    if depth > 8 {
        return Err(format!("{}: include nesting too deep", path.display()));
    }
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    for include in &file.include {
        let included_path = dir.join(include);
        let included = read_file(&included_path)?;
        collect_models(&included_path, &included, models, depth + 1)?;
    }
    for (name, model) in &file.models {
        models.insert(name.clone(), Arc::new(model.clone()));
    }
    Ok(())
}

/// The capability minors of GPU instance `gi` and its compute instance `ci` on the card with device
/// minor `gpu_minor`, from the driver's static table (`/proc/driver/nvidia-caps/mig-minors`): `config`
/// 1, `monitor` 2, then per GPU minor 15 GPU instances, each its `access` minor followed by its eight
/// compute instances'.
pub fn mig_capability_minors(gpu_minor: u32, gi: u32, ci: u32) -> (u32, u32) {
    let gi_minor = 3 + gpu_minor * 15 * 9 + gi * 9;
    (gi_minor, gi_minor + 1 + ci)
}
