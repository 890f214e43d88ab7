//! Hotplug and driver changes on a fixture host: each call changes the tree
//! the way the kernel does and returns, in order, the uevents the kernel
//! would send for it, so a test can feed them to the code under test.

use crate::fixture_device::FixtureDevice;
use crate::host_tree::HostTree;
use crate::kernel_uevent::{KernelAction, UEventPayload, kernel_uevent};
use crate::sysfs_layout;

impl HostTree {
    /// Hot-adds a device: `add`, then `bind` when `device.driver` is set (the
    /// kernel announces the device before a driver probes it).
    ///
    /// Panics if a device already sits at that address.
    pub fn add_device(&self, device: &FixtureDevice) -> Vec<UEventPayload> {
        assert!(
            self.device(&device.address).is_none(),
            "fixture host already has a device at {}",
            device.address
        );
        let unbound = device.clone().unbound();
        self.place_device(&unbound);
        let mut events = vec![kernel_uevent(KernelAction::Add, &unbound, self.next_seqnum())];
        if let Some(driver) = &device.driver {
            events.extend(self.bind_driver(&device.address, driver));
        }
        events
    }

    /// Hot-removes a device: `unbind` first when a driver is bound, then `remove`.
    ///
    /// Panics if there is no device at `address`.
    pub fn remove_device(&self, address: &str) -> Vec<UEventPayload> {
        let mut events = self.unbind_driver(address);
        let device = self.expect_device(address);
        sysfs_layout::remove_device(self.root(), &device);
        self.devices_mut().remove(address);
        events.push(kernel_uevent(KernelAction::Remove, &device, self.next_seqnum()));
        events
    }

    /// Binds `driver` (e.g. `vfio-pci`): unbinds the current driver first, as
    /// writing `driver_override` and `bind` requires. Binding the driver that
    /// is already bound changes nothing and sends nothing.
    pub fn bind_driver(&self, address: &str, driver: &str) -> Vec<UEventPayload> {
        let current = self.expect_device(address);
        if current.driver.as_deref() == Some(driver) {
            return Vec::new();
        }
        let mut events = self.unbind_driver(address);
        let bound = current.with_driver(driver);
        // The record first, the links last: whoever sees the `driver` link sees the whole binding.
        self.devices_mut().insert(address.to_string(), bound.clone());
        sysfs_layout::link_driver(self.root(), &bound, driver);
        events.push(kernel_uevent(KernelAction::Bind, &bound, self.next_seqnum()));
        events
    }

    /// Unbinds the bound driver; an unbound device changes nothing and sends nothing.
    pub fn unbind_driver(&self, address: &str) -> Vec<UEventPayload> {
        let current = self.expect_device(address);
        let Some(driver) = current.driver.clone() else {
            return Vec::new();
        };
        let unbound = current.clone().unbound();
        self.devices_mut().insert(address.to_string(), unbound.clone());
        sysfs_layout::unlink_driver(self.root(), &current, &driver);
        vec![kernel_uevent(KernelAction::Unbind, &unbound, self.next_seqnum())]
    }

    /// A `change` uevent for the device, as `echo change > .../uevent` triggers; the tree is unchanged.
    pub fn change_event(&self, address: &str) -> UEventPayload {
        kernel_uevent(KernelAction::Change, &self.expect_device(address), self.next_seqnum())
    }

    fn expect_device(&self, address: &str) -> FixtureDevice {
        self.device(address)
            .unwrap_or_else(|| panic!("fixture host has no device at {address}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions(events: &[UEventPayload]) -> Vec<String> {
        events
            .iter()
            .map(|e| String::from_utf8_lossy(e).split('@').next().unwrap_or("").to_string())
            .collect()
    }

    #[test]
    fn moving_a_gpu_to_vfio_unbinds_then_binds_and_relinks_the_driver() {
        let host = HostTree::new();
        let added = host.add_device(&FixtureDevice::a30_pcie("0000:01:00.0"));
        assert_eq!(actions(&added), ["add", "bind"]);

        let moved = host.bind_driver("0000:01:00.0", "vfio-pci");
        assert_eq!(actions(&moved), ["unbind", "bind"]);
        let driver = std::fs::read_link(host.path("sys/bus/pci/devices/0000:01:00.0/driver")).unwrap();
        assert!(driver.ends_with("bus/pci/drivers/vfio-pci"), "{}", driver.display());
        assert!(host.path("sys/bus/pci/drivers/vfio-pci/0000:01:00.0").exists());
        assert!(!host.path("sys/bus/pci/drivers/nvidia/0000:01:00.0").exists());
        assert!(host.bind_driver("0000:01:00.0", "vfio-pci").is_empty());
    }

    #[test]
    fn removing_a_bound_gpu_sends_unbind_then_remove_with_growing_seqnums() {
        let host = HostTree::new();
        host.add_device(&FixtureDevice::h100_pcie("0000:41:00.0"));
        let removed = host.remove_device("0000:41:00.0");
        assert_eq!(actions(&removed), ["unbind", "remove"]);
        let seqnums: Vec<u64> = removed
            .iter()
            .map(|e| {
                let text = String::from_utf8_lossy(e).to_string();
                let seq = text
                    .split('\0')
                    .find_map(|f| f.strip_prefix("SEQNUM="))
                    .unwrap()
                    .to_string();
                seq.parse().unwrap()
            })
            .collect();
        assert!(seqnums[0] < seqnums[1]);
        assert!(!host.path("sys/bus/pci/devices/0000:41:00.0").exists());
        assert!(host.device("0000:41:00.0").is_none());
    }
}
