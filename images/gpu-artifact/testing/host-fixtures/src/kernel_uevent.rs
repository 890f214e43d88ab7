//! The bytes the kernel multicasts on NETLINK_KOBJECT_UEVENT for a PCI device.
//!
//! Layout (lib/kobject_uevent.c, drivers/base/core.c dev_uevent,
//! drivers/pci/hotplug.c pci_uevent): a header `ACTION@DEVPATH`, then
//! `KEY=VALUE` pairs, every one NUL-terminated, in this order: ACTION,
//! DEVPATH, SUBSYSTEM, DRIVER (only while a driver is bound), PCI_CLASS,
//! PCI_ID, PCI_SUBSYS_ID, PCI_SLOT_NAME, MODALIAS, SEQNUM. On `unbind` the
//! kernel drops MODALIAS (zap_modalias_env) so that nothing loads a module
//! for a device that is being released.

use crate::fixture_device::FixtureDevice;

/// One kernel uevent as sent on the netlink socket.
pub type UEventPayload = Vec<u8>;

/// Kernel actions a PCI device sees (enum kobject_action, lower case on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelAction {
    Add,
    Remove,
    Change,
    Bind,
    Unbind,
}

impl KernelAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Remove => "remove",
            Self::Change => "change",
            Self::Bind => "bind",
            Self::Unbind => "unbind",
        }
    }
}

/// The payload for `action` on `device`, whose `driver` is the driver bound
/// at the moment the kernel sends it (none on add, remove and unbind).
pub fn kernel_uevent(action: KernelAction, device: &FixtureDevice, seqnum: u64) -> UEventPayload {
    let devpath = format!("/{}", device.devpath());
    let mut fields = vec![
        format!("{}@{devpath}", action.as_str()),
        format!("ACTION={}", action.as_str()),
        format!("DEVPATH={devpath}"),
        "SUBSYSTEM=pci".to_string(),
    ];
    if let Some(driver) = &device.driver {
        fields.push(format!("DRIVER={driver}"));
    }
    // "%04X" of the 24-bit class: 0x030200 prints as "30200".
    fields.push(format!("PCI_CLASS={:04X}", device.class));
    fields.push(format!("PCI_ID={:04X}:{:04X}", device.vendor, device.device));
    fields.push(format!(
        "PCI_SUBSYS_ID={:04X}:{:04X}",
        device.subsystem_vendor, device.subsystem_device
    ));
    fields.push(format!("PCI_SLOT_NAME={}", device.address));
    if action != KernelAction::Unbind {
        fields.push(modalias(device));
    }
    fields.push(format!("SEQNUM={seqnum}"));

    let mut payload = Vec::new();
    for field in fields {
        payload.extend_from_slice(field.as_bytes());
        payload.push(0);
    }
    payload
}

/// `pci:v%08Xd%08Xsv%08Xsd%08Xbc%02Xsc%02Xi%02x` (the prog-if is lower-case hex in the kernel too).
fn modalias(device: &FixtureDevice) -> String {
    format!(
        "MODALIAS=pci:v{:08X}d{:08X}sv{:08X}sd{:08X}bc{:02X}sc{:02X}i{:02x}",
        device.vendor,
        device.device,
        device.subsystem_vendor,
        device.subsystem_device,
        (device.class >> 16) & 0xff,
        (device.class >> 8) & 0xff,
        device.class & 0xff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_of_an_a30_matches_the_kernel_format_byte_for_byte() {
        let a30 = FixtureDevice::a30_pcie("0000:01:00.0").unbound();
        let payload = kernel_uevent(KernelAction::Remove, &a30, 1234);
        let expected: &[u8] = b"remove@/devices/pci0000:00/0000:00:01.0/0000:01:00.0\0\
            ACTION=remove\0DEVPATH=/devices/pci0000:00/0000:00:01.0/0000:01:00.0\0SUBSYSTEM=pci\0\
            PCI_CLASS=30200\0PCI_ID=10DE:20B7\0PCI_SUBSYS_ID=10DE:1532\0PCI_SLOT_NAME=0000:01:00.0\0\
            MODALIAS=pci:v000010DEd000020B7sv000010DEsd00001532bc03sc02i00\0SEQNUM=1234\0";
        assert_eq!(String::from_utf8_lossy(&payload), String::from_utf8_lossy(expected));
    }

    #[test]
    fn bind_carries_the_driver_and_unbind_drops_the_modalias() {
        let a30 = FixtureDevice::a30_pcie("0000:01:00.0").with_driver("vfio-pci");
        let bind = String::from_utf8(kernel_uevent(KernelAction::Bind, &a30, 7)).unwrap();
        assert!(bind.contains("\0DRIVER=vfio-pci\0PCI_CLASS=30200\0"));
        assert!(bind.contains("\0MODALIAS=pci:"));

        let unbind = String::from_utf8(kernel_uevent(KernelAction::Unbind, &a30.unbound(), 8)).unwrap();
        assert!(unbind.starts_with("unbind@/devices/"));
        assert!(!unbind.contains("DRIVER="));
        assert!(!unbind.contains("MODALIAS="));
        assert!(unbind.ends_with("PCI_SLOT_NAME=0000:01:00.0\0SEQNUM=8\0"));
    }
}
