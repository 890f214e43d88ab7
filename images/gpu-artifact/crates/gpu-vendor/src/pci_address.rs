//! The PCI address that keys a card everywhere (sysfs, NVML, PhysicalGPU).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A PCI function address in the canonical sysfs form `0000:3b:00.0`
/// (4-digit domain, lower-case hex).
///
/// Vendor libraries spell the same address differently (NVML reports
/// `00000000:3B:00.0`); parsing accepts those spellings so that the node
/// agent's sysfs view and the vendor's view compare equal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

/// Why a string is not a PCI address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?} is not a PCI address (expected domain:bus:device.function in hex)")]
pub struct PciAddressError {
    input: String,
}

impl FromStr for PciAddress {
    type Err = PciAddressError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = || PciAddressError {
            input: input.to_owned(),
        };
        let mut parts = input.trim().split(':');
        let (domain, bus, rest) = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(domain), Some(bus), Some(rest), None) => (domain, bus, rest),
            // NVML also accepts bus:device.function with domain 0.
            (Some(bus), Some(rest), None, None) => ("0", bus, rest),
            _ => return Err(error()),
        };
        let (device, function) = rest.split_once('.').ok_or_else(error)?;
        let hex = |s: &str, max_len: usize| {
            if s.is_empty() || s.len() > max_len {
                return Err(error());
            }
            u32::from_str_radix(s, 16).map_err(|_| error())
        };
        let device = hex(device, 2)?;
        let function = hex(function, 1)?;
        if device > 0x1f || function > 7 {
            return Err(error());
        }
        Ok(PciAddress {
            domain: hex(domain, 8)?,
            bus: hex(bus, 2)? as u8,
            device: device as u8,
            function: function as u8,
        })
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl TryFrom<String> for PciAddress {
    type Error = PciAddressError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<PciAddress> for String {
    fn from(value: PciAddress) -> Self {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvml_and_sysfs_spellings_are_the_same_address() {
        let nvml: PciAddress = "00000000:3B:00.0".parse().unwrap();
        let sysfs: PciAddress = "0000:3b:00.0".parse().unwrap();
        assert_eq!(nvml, sysfs);
        assert_eq!(nvml.to_string(), "0000:3b:00.0");
    }

    #[test]
    fn domain_may_be_omitted() {
        let short: PciAddress = "c1:00.1".parse().unwrap();
        assert_eq!(short.to_string(), "0000:c1:00.1");
    }

    #[test]
    fn garbage_is_refused() {
        for bad in ["", "0000:3b:00", "0000:3b:20.0", "0000:3b:00.8", "zz:00.0", "0:0:0:0.0"] {
            assert!(bad.parse::<PciAddress>().is_err(), "{bad:?} parsed");
        }
    }
}
