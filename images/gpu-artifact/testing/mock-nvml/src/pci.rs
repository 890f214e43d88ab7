//! PCI bus ids the way NVML accepts and prints them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A PCI function address. Parses every form `nvmlDeviceGetHandleByPciBusId`
/// accepts (`domain:bus:device.function` with a 4- or 8-digit domain, or
/// `bus:device.function`); displays in the sysfs form `0000:3b:00.0`, which is
/// how description and state files key cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PciBusId {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl PciBusId {
    /// `nvmlPciInfo_t.busId`: `00000000:3B:00.0`.
    pub fn nvml_bus_id(&self) -> String {
        format!(
            "{:08X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }

    /// `nvmlPciInfo_t.busIdLegacy`: `0000:3B:00.0`.
    pub fn nvml_legacy_bus_id(&self) -> String {
        format!(
            "{:04X}:{:02X}:{:02X}.{:X}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciBusId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not a PCI bus id");
        let parts: Vec<&str> = s.trim().split(':').collect();
        let (domain, bus, rest) = match parts.as_slice() {
            [domain, bus, rest] => (*domain, *bus, *rest),
            [bus, rest] => ("0", *bus, *rest),
            _ => return Err(bad()),
        };
        let (device, function) = rest.split_once('.').ok_or_else(bad)?;
        let hex = |v: &str| u32::from_str_radix(v, 16).map_err(|_| bad());
        Ok(PciBusId {
            domain: hex(domain)?,
            bus: hex(bus)?,
            device: hex(device)?,
            function: hex(function)?,
        })
    }
}

impl fmt::Display for PciBusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl TryFrom<String> for PciBusId {
    type Error = String;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<PciBusId> for String {
    fn from(value: PciBusId) -> Self {
        value.to_string()
    }
}
