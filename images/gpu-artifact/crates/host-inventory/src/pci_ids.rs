//! Names from the host's PCI ID database (`pci.ids`), read once and kept
//! small: only the entries of the vendors asked for, plus the (short) class
//! section.
//!
//! Format: `vendor  name` lines, tab-indented `device  name` lines, two-tab
//! `subvendor subdevice  name` lines, and at the end a `C class  name`
//! section with tab-indented subclasses and two-tab prog-ifs. Lines that do
//! not fit are skipped: a damaged entry must not cost the names of the others.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use crate::host_root::HostRoot;

/// Where distributions install pci.ids, in search order (Debian and Ubuntu; Fedora and RHEL; older layouts).
pub const PCI_IDS_PATHS: [&str; 3] = [
    "usr/share/misc/pci.ids",
    "usr/share/hwdata/pci.ids",
    "usr/share/pci.ids",
];

#[derive(Debug, thiserror::Error)]
pub enum PciIdsError {
    #[error("no pci.ids under {root}: looked at {searched:?}")]
    NotFound { root: PathBuf, searched: Vec<PathBuf> },
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
}

/// The kept part of a pci.ids database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PciIds {
    vendors: HashMap<u16, VendorEntry>,
    classes: HashMap<u8, ClassEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct VendorEntry {
    name: String,
    devices: HashMap<u16, DeviceEntry>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct DeviceEntry {
    name: String,
    subsystems: HashMap<(u16, u16), String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ClassEntry {
    name: String,
    subclasses: HashMap<u8, String>,
}

/// What the indented lines under the last top-level line belong to.
enum Section {
    KeptVendor(u16),
    SkippedVendor,
    Class(u8),
    Unknown,
}

impl PciIds {
    /// Loads the first pci.ids found under `root` (see [`PCI_IDS_PATHS`]), keeping `vendors` only.
    pub fn load(root: &HostRoot, vendors: &[u16]) -> Result<Self, PciIdsError> {
        let searched: Vec<PathBuf> = PCI_IDS_PATHS.iter().map(|p| root.path(p)).collect();
        for path in &searched {
            match File::open(path) {
                Ok(file) => {
                    return Self::read(BufReader::new(file), vendors).map_err(|source| PciIdsError::Read {
                        path: path.clone(),
                        source,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(source) => {
                    return Err(PciIdsError::Read {
                        path: path.clone(),
                        source,
                    });
                }
            }
        }
        Err(PciIdsError::NotFound {
            root: root.root().to_path_buf(),
            searched,
        })
    }

    /// Parses a database held in memory, keeping `vendors` only.
    pub fn parse(text: &str, vendors: &[u16]) -> Self {
        Self::read(text.as_bytes(), vendors).unwrap_or_default()
    }

    /// Parses a database line by line, keeping `vendors` only.
    pub fn read(mut reader: impl BufRead, vendors: &[u16]) -> io::Result<Self> {
        let mut ids = Self::default();
        let mut section = Section::Unknown;
        let mut current_device: Option<u16> = None;
        let mut line = Vec::with_capacity(256);
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                return Ok(ids);
            }
            let depth = line.iter().take_while(|b| **b == b'\t').count();
            // Most of the file is other vendors' devices: skip them before decoding.
            if depth > 0 && matches!(section, Section::SkippedVendor | Section::Unknown) {
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            // `depth` counts leading tab bytes, which lossy decoding keeps as one-byte characters:
            // the slice starts on a character boundary within the text.
            let body = text.get(depth..).unwrap_or_default();
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            match depth {
                0 => {
                    current_device = None;
                    section = ids.top_level(body, vendors);
                }
                1 => current_device = ids.second_level(&section, body),
                2 => ids.third_level(&section, current_device, body),
                _ => {}
            }
        }
    }

    fn top_level(&mut self, body: &str, vendors: &[u16]) -> Section {
        if let Some(class_line) = body.strip_prefix("C ") {
            return match split_id(class_line).and_then(|(id, name)| Some((u8::from_str_radix(id, 16).ok()?, name))) {
                Some((class, name)) => {
                    self.classes.insert(
                        class,
                        ClassEntry {
                            name: name.to_string(),
                            ..Default::default()
                        },
                    );
                    Section::Class(class)
                }
                None => Section::Unknown,
            };
        }
        match split_id(body).and_then(|(id, name)| Some((parse_u16(id)?, name))) {
            Some((vendor, name)) if vendors.contains(&vendor) => {
                // A vendor listed twice (a hand-merged file) adds to its first block, never wipes it.
                self.vendors.entry(vendor).or_insert_with(|| VendorEntry {
                    name: name.to_string(),
                    ..Default::default()
                });
                Section::KeptVendor(vendor)
            }
            Some(_) => Section::SkippedVendor,
            None => Section::Unknown,
        }
    }

    fn second_level(&mut self, section: &Section, body: &str) -> Option<u16> {
        let (id, name) = split_id(body)?;
        match section {
            Section::KeptVendor(vendor) => {
                let device = parse_u16(id)?;
                let entry = DeviceEntry {
                    name: name.to_string(),
                    ..Default::default()
                };
                self.vendors.get_mut(vendor)?.devices.insert(device, entry);
                Some(device)
            }
            Section::Class(class) => {
                let subclass = u8::from_str_radix(id, 16).ok()?;
                self.classes
                    .get_mut(class)?
                    .subclasses
                    .insert(subclass, name.to_string());
                None
            }
            Section::SkippedVendor | Section::Unknown => None,
        }
    }

    fn third_level(&mut self, section: &Section, device: Option<u16>, body: &str) {
        // Only subsystems are kept; a class's prog-ifs are not needed.
        let (Section::KeptVendor(vendor), Some(device)) = (section, device) else {
            return;
        };
        let mut parts = body.splitn(3, char::is_whitespace);
        let (Some(sub_vendor), Some(sub_device), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            return;
        };
        let (Some(sub_vendor), Some(sub_device)) = (parse_u16(sub_vendor), parse_u16(sub_device)) else {
            return;
        };
        let name = name.trim();
        if let Some(entry) = self.vendors.get_mut(vendor).and_then(|v| v.devices.get_mut(&device)) {
            entry.subsystems.insert((sub_vendor, sub_device), name.to_string());
        }
    }

    pub fn vendor_name(&self, vendor: u16) -> Option<&str> {
        self.vendors.get(&vendor).map(|v| v.name.as_str())
    }

    pub fn device_name(&self, vendor: u16, device: u16) -> Option<&str> {
        self.device(vendor, device).map(|d| d.name.as_str())
    }

    pub fn subsystem_name(&self, vendor: u16, device: u16, sub_vendor: u16, sub_device: u16) -> Option<&str> {
        self.device(vendor, device)?
            .subsystems
            .get(&(sub_vendor, sub_device))
            .map(String::as_str)
    }

    /// The subclass's name (`3D controller` for 0x0302), or the class's when
    /// the subclass is not listed, as lspci falls back.
    pub fn class_name(&self, class_code: u16) -> Option<&str> {
        let class = self.classes.get(&((class_code >> 8) as u8))?;
        let subclass = class.subclasses.get(&(class_code as u8));
        Some(subclass.unwrap_or(&class.name).as_str())
    }

    fn device(&self, vendor: u16, device: u16) -> Option<&DeviceEntry> {
        self.vendors.get(&vendor)?.devices.get(&device)
    }
}

/// `"10de  NVIDIA Corporation"` -> `("10de", "NVIDIA Corporation")`.
fn split_id(body: &str) -> Option<(&str, &str)> {
    let (id, name) = body.split_once(char::is_whitespace)?;
    let name = name.trim();
    (!name.is_empty()).then_some((id, name))
}

fn parse_u16(id: &str) -> Option<u16> {
    if id.len() != 4 {
        return None;
    }
    u16::from_str_radix(id, 16).ok()
}
