//! One PCI function as a fixture describes it, and the catalogue of the cards
//! the named fixtures use.
//!
//! Vendor and device ids and their names come from the PCI ID database
//! (`fixtures/pci.ids`, an unchanged excerpt of version 2023.04.10). That
//! database has no subsystem lines for the NVIDIA cards below, so their
//! subsystem ids are board values given for realism only; AMD's 1002:0e3a is a
//! real pci.ids subsystem line ("Radeon RX 6900 XT").

/// NVIDIA Corporation in pci.ids.
pub const NVIDIA: u16 = 0x10de;
/// Advanced Micro Devices, Inc. [AMD/ATI] in pci.ids.
pub const AMD: u16 = 0x1002;
/// Intel Corporation in pci.ids.
pub const INTEL: u16 = 0x8086;

/// PCI class codes as the kernel writes them to sysfs `class` (class, subclass, prog-if).
pub const CLASS_VGA: u32 = 0x03_00_00;
pub const CLASS_3D: u32 = 0x03_02_00;
pub const CLASS_AUDIO: u32 = 0x04_03_00;
pub const CLASS_ETHERNET: u32 = 0x02_00_00;
pub const CLASS_PCI_BRIDGE: u32 = 0x06_04_00;

/// One PCI function of a fixture host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureDevice {
    /// Bus address, e.g. `0000:01:00.0`.
    pub address: String,
    /// 24-bit class code (class, subclass, prog-if), e.g. `0x030200`.
    pub class: u32,
    pub vendor: u16,
    pub device: u16,
    pub subsystem_vendor: u16,
    pub subsystem_device: u16,
    /// As sysfs writes it: `-1` when the platform reports no NUMA affinity.
    pub numa_node: i32,
    /// `None` when the IOMMU is off (no `iommu_group` link).
    pub iommu_group: Option<u32>,
    /// Name of the bound driver, `None` when unbound.
    pub driver: Option<String>,
    /// Path of the upstream port below `/sys/devices`, e.g. `pci0000:00/0000:00:01.0`.
    pub parent: String,
}

impl FixtureDevice {
    /// A function with no NUMA node, no IOMMU group and no driver.
    pub fn new(address: &str, class: u32, vendor: u16, device: u16, subsystem: (u16, u16)) -> Self {
        Self {
            address: address.to_string(),
            class,
            vendor,
            device,
            subsystem_vendor: subsystem.0,
            subsystem_device: subsystem.1,
            numa_node: -1,
            iommu_group: None,
            driver: None,
            parent: default_parent(address),
        }
    }

    /// NVIDIA A30, pci.ids `10de 20b7 GA100GL [A30 PCIe]`, bound to `nvidia`.
    pub fn a30_pcie(address: &str) -> Self {
        Self::new(address, CLASS_3D, NVIDIA, 0x20b7, (NVIDIA, 0x1532)).with_driver("nvidia")
    }

    /// NVIDIA A100 SXM4 80GB, pci.ids `10de 20b2 GA100 [A100 SXM4 80GB]`, bound to `nvidia`.
    pub fn a100_sxm4_80gb(address: &str) -> Self {
        Self::new(address, CLASS_3D, NVIDIA, 0x20b2, (NVIDIA, 0x1463)).with_driver("nvidia")
    }

    /// NVIDIA H100 PCIe, pci.ids `10de 2331 GH100 [H100 PCIe]`, bound to `nvidia`.
    pub fn h100_pcie(address: &str) -> Self {
        Self::new(address, CLASS_3D, NVIDIA, 0x2331, (NVIDIA, 0x1626)).with_driver("nvidia")
    }

    /// NVIDIA H100 SXM5 80GB, pci.ids `10de 2330 GH100 [H100 SXM5 80GB]`, bound to `nvidia`.
    pub fn h100_sxm5_80gb(address: &str) -> Self {
        Self::new(address, CLASS_3D, NVIDIA, 0x2330, (NVIDIA, 0x16c1)).with_driver("nvidia")
    }

    /// NVIDIA GeForce RTX 4090, pci.ids `10de 2684 AD102 [GeForce RTX 4090]`, a VGA
    /// controller bound to `nvidia`.
    pub fn rtx_4090(address: &str) -> Self {
        Self::new(address, CLASS_VGA, NVIDIA, 0x2684, (NVIDIA, 0x167c)).with_driver("nvidia")
    }

    /// The HD audio function of an RTX 4090, pci.ids `10de 22ba AD102 High
    /// Definition Audio Controller`, bound to `snd_hda_intel`.
    pub fn rtx_4090_audio(address: &str) -> Self {
        Self::new(address, CLASS_AUDIO, NVIDIA, 0x22ba, (NVIDIA, 0x167c)).with_driver("snd_hda_intel")
    }

    /// AMD Radeon RX 6900 XT, pci.ids `1002 73bf Navi 21 [...]`, subsystem
    /// `1002 0e3a Radeon RX 6900 XT`, bound to `amdgpu`.
    pub fn radeon_rx_6900_xt(address: &str) -> Self {
        Self::new(address, CLASS_VGA, AMD, 0x73bf, (AMD, 0x0e3a)).with_driver("amdgpu")
    }

    /// Intel I350 network card, pci.ids `8086 1521 I350 Gigabit Network Connection`, bound to `igb`.
    pub fn i350_nic(address: &str) -> Self {
        Self::new(address, CLASS_ETHERNET, INTEL, 0x1521, (INTEL, 0x0001)).with_driver("igb")
    }

    /// Intel root port, pci.ids `8086 2030 Sky Lake-E PCI Express Root Port A`,
    /// bound to `pcieport`: the kind of non-GPU device every real host has.
    pub fn root_port(address: &str) -> Self {
        Self::new(address, CLASS_PCI_BRIDGE, INTEL, 0x2030, (INTEL, 0x0000)).with_driver("pcieport")
    }

    pub fn with_numa_node(mut self, node: i32) -> Self {
        self.numa_node = node;
        self
    }

    pub fn with_iommu_group(mut self, group: u32) -> Self {
        self.iommu_group = Some(group);
        self
    }

    pub fn with_driver(mut self, driver: &str) -> Self {
        self.driver = Some(driver.to_string());
        self
    }

    pub fn unbound(mut self) -> Self {
        self.driver = None;
        self
    }

    pub fn with_parent(mut self, parent: &str) -> Self {
        self.parent = parent.to_string();
        self
    }

    /// The device's kernel path below `/sys`, e.g. `devices/pci0000:00/0000:00:01.0/0000:01:00.0`:
    /// the uevent DEVPATH without its leading `/`.
    pub fn devpath(&self) -> String {
        format!("devices/{}/{}", self.parent, self.address)
    }
}

/// A root port on bus 00 of the device's domain, the usual place of a GPU
/// below a host bridge; functions of one bus share it, as they do on real
/// hosts. Devices on bus 00 hang directly off the host bridge.
fn default_parent(address: &str) -> String {
    let mut parts = address.split(':');
    let domain = parts.next().unwrap_or("0000");
    let bus = parts.next().and_then(|b| u8::from_str_radix(b, 16).ok()).unwrap_or(0);
    if bus == 0 {
        return format!("pci{domain}:00");
    }
    let port = (bus - 1) % 0x1f + 1;
    format!("pci{domain}:00/{domain}:00:{port:02x}.0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_of_one_bus_share_their_upstream_port() {
        let gpu = FixtureDevice::rtx_4090("0000:01:00.0");
        let audio = FixtureDevice::rtx_4090_audio("0000:01:00.1");
        assert_eq!(gpu.parent, "pci0000:00/0000:00:01.0");
        assert_eq!(audio.parent, gpu.parent);
        assert_eq!(audio.devpath(), "devices/pci0000:00/0000:00:01.0/0000:01:00.1");
    }

    #[test]
    fn bus_zero_devices_hang_off_the_host_bridge() {
        assert_eq!(
            FixtureDevice::root_port("0000:00:01.0").devpath(),
            "devices/pci0000:00/0000:00:01.0"
        );
    }
}
