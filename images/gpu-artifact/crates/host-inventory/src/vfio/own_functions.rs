//! Which functions of a card's IOMMU group are the card's own, and may follow it to vfio-pci.
//!
//! A GPU's own functions sit in its slot (same domain, bus and device number): the GPU itself and,
//! from the same vendor, its HD audio, USB (a Type-C port's controller) and serial-bus (the USB-C
//! UCSI controller) functions. Anything else in the group (a network card, an NVMe drive, another
//! vendor's function, a function of another slot) is a device of the host that only shares the
//! group because the board lacks ACS isolation; passthrough would take it from the host, so the
//! caller refuses the card instead. PCI bridges stay where they are (the kernel lets a viable group
//! keep its bridges on their driver) and are neither moved nor counted against the card.

use super::group::PciFunction;

/// PCI base class and subclass (the top 16 bits of the 24-bit class) of the functions a GPU board
/// carries besides the GPU: HD audio, USB controller, serial-bus controller (UCSI).
const OWN_COMPANION_CLASSES: [u32; 3] = [0x0403, 0x0c03, 0x0c80];

/// A card's IOMMU group, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSplit {
    /// The card and its companions, in address order: what moves to vfio-pci.
    pub own: Vec<PciFunction>,
    /// Every other function but bridges: why the card must not be passed through.
    pub foreign: Vec<PciFunction>,
}

/// `0000:01:00.1` -> `0000:01:00`.
fn slot(address: &str) -> &str {
    address.rsplit_once('.').map_or(address, |(slot, _)| slot)
}

/// Splits `group` (every function of `card`'s IOMMU group) into the card's own functions and the
/// foreign ones; bridges are in neither.
pub fn split_group(card: &PciFunction, group: Vec<PciFunction>) -> GroupSplit {
    let mut split = GroupSplit {
        own: Vec::new(),
        foreign: Vec::new(),
    };
    for function in group {
        if function.is_bridge() {
            continue;
        }
        let companion = slot(&function.address) == slot(&card.address)
            && function.vendor_id == card.vendor_id
            && OWN_COMPANION_CLASSES.contains(&(function.class >> 8));
        if function.address == card.address || companion {
            split.own.push(function);
        } else {
            split.foreign.push(function);
        }
    }
    split
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(address: &str, vendor_id: u16, class: u32) -> PciFunction {
        PciFunction {
            address: address.into(),
            vendor_id,
            device_id: 0x1234,
            class,
            driver: None,
        }
    }

    #[test]
    fn the_cards_audio_usb_and_serial_functions_are_its_own() {
        let card = function("0000:01:00.0", 0x10de, 0x030000);
        let group = vec![
            function("0000:00:01.0", 0x8086, 0x060400),
            card.clone(),
            function("0000:01:00.1", 0x10de, 0x040300),
            function("0000:01:00.2", 0x10de, 0x0c0330),
            function("0000:01:00.3", 0x10de, 0x0c8000),
        ];
        let split = split_group(&card, group);
        let own: Vec<&str> = split.own.iter().map(|f| f.address.as_str()).collect();
        assert_eq!(own, ["0000:01:00.0", "0000:01:00.1", "0000:01:00.2", "0000:01:00.3"]);
        assert!(split.foreign.is_empty());
    }

    #[test]
    fn another_slot_another_vendor_or_another_class_is_foreign() {
        let card = function("0000:01:00.0", 0x10de, 0x030200);
        let group = vec![
            card.clone(),
            function("0000:02:00.0", 0x8086, 0x020000),
            function("0000:01:00.1", 0x8086, 0x040300),
            function("0000:01:00.2", 0x10de, 0x010802),
            function("0000:03:00.1", 0x10de, 0x040300),
        ];
        let split = split_group(&card, group);
        let foreign: Vec<&str> = split.foreign.iter().map(|f| f.address.as_str()).collect();
        assert_eq!(
            foreign,
            ["0000:02:00.0", "0000:01:00.1", "0000:01:00.2", "0000:03:00.1"]
        );
        assert_eq!(split.own.len(), 1);
    }
}
