//! PCI bus addresses (`domain:bus:device.function`) and their order, which
//! gives each GPU its stable index on the node.

use std::fmt;
use std::str::FromStr;

/// A PCI function's address, ordered numerically: domain, bus, device, function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a PCI address (domain:bus:device.function, e.g. 0000:01:00.0)")]
pub struct PciAddressError(pub String);

impl FromStr for PciAddress {
    type Err = PciAddressError;

    /// Parses the form sysfs uses. Domains wider than four digits exist
    /// (Intel VMD puts devices in domain 10000 and up), so the domain is not
    /// limited to four digits.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || PciAddressError(text.to_string());
        let (domain, rest) = text.split_once(':').ok_or_else(bad)?;
        let (bus, rest) = rest.split_once(':').ok_or_else(bad)?;
        let (device, function) = rest.split_once('.').ok_or_else(bad)?;
        let hex = |digits: &str, max_len: usize| {
            if digits.is_empty() || digits.len() > max_len || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad());
            }
            u32::from_str_radix(digits, 16).map_err(|_| bad())
        };
        let address = Self {
            domain: hex(domain, 8)?,
            bus: hex(bus, 2)? as u8,
            device: hex(device, 2)? as u8,
            function: hex(function, 1)? as u8,
        };
        if address.device > 0x1f || address.function > 7 {
            return Err(bad());
        }
        Ok(address)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_the_sysfs_form() {
        let address: PciAddress = "0000:b7:00.0".parse().unwrap();
        assert_eq!(
            address,
            PciAddress {
                domain: 0,
                bus: 0xb7,
                device: 0,
                function: 0
            }
        );
        assert_eq!(address.to_string(), "0000:b7:00.0");
        assert_eq!(
            "10000:e1:00.1".parse::<PciAddress>().unwrap().to_string(),
            "10000:e1:00.1"
        );
    }

    #[test]
    fn orders_numerically_across_domains_and_buses() {
        let mut addresses: Vec<PciAddress> = [
            "10000:01:00.0",
            "0000:bd:00.0",
            "0000:07:00.0",
            "0000:07:00.1",
            "0001:00:00.0",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        addresses.sort();
        let printed: Vec<String> = addresses.iter().map(ToString::to_string).collect();
        assert_eq!(
            printed,
            [
                "0000:07:00.0",
                "0000:07:00.1",
                "0000:bd:00.0",
                "0001:00:00.0",
                "10000:01:00.0"
            ]
        );
    }

    #[test]
    fn rejects_what_is_not_an_address() {
        for text in [
            "",
            "0000:01:00",
            "0000:01:20.0",
            "0000:01:00.8",
            "zz00:01:00.0",
            "0000:001:00.0",
            "0000:01:00.0x",
        ] {
            assert_eq!(
                text.parse::<PciAddress>(),
                Err(PciAddressError(text.to_string())),
                "{text}"
            );
        }
    }
}
