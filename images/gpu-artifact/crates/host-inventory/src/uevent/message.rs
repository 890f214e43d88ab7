//! Parsing one NETLINK_KOBJECT_UEVENT datagram.
//!
//! The kernel sends `ACTION@DEVPATH\0` followed by `KEY=VALUE\0` pairs
//! (lib/kobject_uevent.c). udev re-broadcasts events with a binary header
//! that starts with `libudev\0`; those are not kernel events and are
//! recognised and set aside, not parsed. Nothing here panics on any input.

use std::fmt;

/// Start of every message udevd (libudev's monitor) sends.
const LIBUDEV_MAGIC: &[u8] = b"libudev\0";

/// The kobject actions (enum kobject_action), as the kernel spells them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UEventAction {
    Add,
    Remove,
    Change,
    Move,
    Online,
    Offline,
    Bind,
    Unbind,
}

impl UEventAction {
    pub fn from_kernel(word: &str) -> Option<Self> {
        Some(match word {
            "add" => Self::Add,
            "remove" => Self::Remove,
            "change" => Self::Change,
            "move" => Self::Move,
            "online" => Self::Online,
            "offline" => Self::Offline,
            "bind" => Self::Bind,
            "unbind" => Self::Unbind,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Remove => "remove",
            Self::Change => "change",
            Self::Move => "move",
            Self::Online => "online",
            Self::Offline => "offline",
            Self::Bind => "bind",
            Self::Unbind => "unbind",
        }
    }
}

impl fmt::Display for UEventAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `PCI_ID=10DE:20B7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PciId {
    pub vendor: u16,
    pub device: u16,
}

/// A kernel uevent with the fields the inventory uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UEvent {
    pub action: UEventAction,
    /// Below `/sys`, e.g. `/devices/pci0000:00/0000:00:01.0/0000:01:00.0`.
    pub devpath: String,
    pub subsystem: Option<String>,
    /// The bound driver, present on `bind` and on events of bound devices.
    pub driver: Option<String>,
    pub pci_slot_name: Option<String>,
    /// The 24-bit class, e.g. 0x030200 from `PCI_CLASS=30200`.
    pub pci_class: Option<u32>,
    pub pci_id: Option<PciId>,
    pub seqnum: Option<u64>,
}

impl UEvent {
    pub fn is_pci(&self) -> bool {
        self.subsystem.as_deref() == Some("pci")
    }
}

/// Why a payload is not a kernel uevent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UEventError {
    #[error("empty uevent payload")]
    Empty,
    #[error("uevent payload is not UTF-8 (first bad byte at {offset})")]
    NotUtf8 { offset: usize },
    #[error("uevent header {header:?} is not ACTION@DEVPATH")]
    BadHeader { header: String },
    #[error("uevent action {action:?} is not a kernel kobject action")]
    UnknownAction { action: String },
    #[error("uevent field {field:?} is not KEY=VALUE")]
    BadField { field: String },
    #[error("uevent {key} {field:?} contradicts its header {header:?}")]
    HeaderMismatch { key: String, header: String, field: String },
    #[error("uevent {key}={value:?} is malformed")]
    BadValue { key: String, value: String },
}

/// Parses one datagram. `Ok(None)`: a udev (libudev) message, to be ignored.
///
/// The header and the fields read here must be UTF-8; other fields are
/// skipped unread, because some subsystems (input device names, say) carry
/// arbitrary bytes and must not turn their events into errors.
pub fn parse(payload: &[u8]) -> Result<Option<UEvent>, UEventError> {
    if payload.starts_with(LIBUDEV_MAGIC) {
        return Ok(None);
    }
    if payload.iter().all(|b| *b == 0) {
        return Err(UEventError::Empty);
    }
    let mut offset = 0;
    let mut parts = payload.split(|b| *b == 0).map(|part| {
        let start = offset;
        offset += part.len() + 1;
        (start, part)
    });
    let (_, header) = parts.next().unwrap_or_default();
    let header = utf8(header, 0)?;
    let (action_word, devpath) = header
        .split_once('@')
        .filter(|(action, devpath)| !action.is_empty() && devpath.starts_with('/'))
        .ok_or_else(|| UEventError::BadHeader {
            header: header.to_string(),
        })?;
    let action = UEventAction::from_kernel(action_word).ok_or_else(|| UEventError::UnknownAction {
        action: action_word.to_string(),
    })?;
    let mut event = UEvent {
        action,
        devpath: devpath.to_string(),
        subsystem: None,
        driver: None,
        pci_slot_name: None,
        pci_class: None,
        pci_id: None,
        seqnum: None,
    };
    // Empty parts are the terminator of the last field.
    for (start, field) in parts.filter(|(_, f)| !f.is_empty()) {
        let split = field.iter().position(|b| *b == b'=').filter(|at| *at > 0);
        let Some(at) = split else {
            let field = String::from_utf8_lossy(field).into_owned();
            return Err(UEventError::BadField { field });
        };
        // `at` is the position of a byte of `field`, so both halves exist; `split_at` never panics there.
        let (key, value) = field.split_at(at);
        let key = utf8(key, start)?;
        if FIELDS_READ.contains(&key) {
            let value = utf8(value.get(1..).unwrap_or_default(), start + at + 1)?;
            apply_field(&mut event, header, key, value)?;
        }
    }
    Ok(Some(event))
}

/// The keys [`apply_field`] reads.
const FIELDS_READ: [&str; 8] = [
    "ACTION",
    "DEVPATH",
    "SUBSYSTEM",
    "DRIVER",
    "PCI_SLOT_NAME",
    "PCI_CLASS",
    "PCI_ID",
    "SEQNUM",
];

fn utf8(bytes: &[u8], start: usize) -> Result<&str, UEventError> {
    std::str::from_utf8(bytes).map_err(|e| UEventError::NotUtf8 {
        offset: start + e.valid_up_to(),
    })
}

fn apply_field(event: &mut UEvent, header: &str, key: &str, value: &str) -> Result<(), UEventError> {
    let bad_value = || UEventError::BadValue {
        key: key.to_string(),
        value: value.to_string(),
    };
    let mismatch = || UEventError::HeaderMismatch {
        key: key.to_string(),
        header: header.to_string(),
        field: value.to_string(),
    };
    match key {
        "ACTION" if value != event.action.as_str() => return Err(mismatch()),
        "DEVPATH" if value != event.devpath => return Err(mismatch()),
        "SUBSYSTEM" => event.subsystem = Some(value.to_string()),
        "DRIVER" => event.driver = Some(value.to_string()),
        "PCI_SLOT_NAME" => event.pci_slot_name = Some(value.to_string()),
        "PCI_CLASS" => {
            let class = u32::from_str_radix(value, 16).ok().filter(|c| *c <= 0xff_ffff);
            event.pci_class = Some(class.ok_or_else(bad_value)?);
        }
        "PCI_ID" => event.pci_id = Some(parse_pci_id(value).ok_or_else(bad_value)?),
        "SEQNUM" => event.seqnum = Some(value.parse().map_err(|_| bad_value())?),
        _ => {}
    }
    Ok(())
}

fn parse_pci_id(value: &str) -> Option<PciId> {
    let (vendor, device) = value.split_once(':')?;
    let hex = |digits: &str| {
        (digits.len() == 4)
            .then(|| u16::from_str_radix(digits, 16).ok())
            .flatten()
    };
    Some(PciId {
        vendor: hex(vendor)?,
        device: hex(device)?,
    })
}
