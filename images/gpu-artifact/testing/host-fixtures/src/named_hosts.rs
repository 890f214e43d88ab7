//! The named fixture hosts, each named for the hardware it describes. Every
//! one has the pci.ids excerpt, Ubuntu 22.04's os-release and a kernel
//! release, a boot id and, where a card is bound to `nvidia`, the driver's
//! `/proc` files; they differ in their PCI devices and DMI.

use crate::fixture_device::{CLASS_PCI_BRIDGE, FixtureDevice};
use crate::host_tree::HostTree;
use crate::nvidia_driver_proc::FIXTURE_BOOT_ID;

/// Ubuntu 22.04's GA kernel, as `uname -r` prints it.
pub const UBUNTU_2204_KERNEL: &str = "5.15.0-105-generic";

/// The named fixtures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedHost {
    /// One A30 (10de:20b7) at 0000:01:00.0, bound to nvidia, bare metal (Dell).
    A30Pcie,
    /// Eight A100 SXM4 80GB (10de:20b2) at DGX A100 addresses, two per NUMA node 0-3.
    A100SxmX8,
    /// One H100 PCIe (10de:2331) at 0000:41:00.0, bare metal (HPE).
    H100Pcie,
    /// Eight H100 SXM5 80GB (10de:2330) at the addresses of the mock NVML machine
    /// `h100-sxm5-80gb-x8.yaml`, two per NUMA node 0-3: the largest node the handler publishes.
    H100SxmX8,
    /// An RTX 4090 (10de:2684, class 0300) and its HD audio function (10de:22ba, class 0403) in one IOMMU group.
    ConsumerWithAudio,
    /// Only an AMD Radeon RX 6900 XT (1002:73bf, class 0300): no NVIDIA GPU.
    NonNvidiaGpu,
    /// A QEMU q35 guest (DMI "Standard PC (Q35 + ICH9, 2009)", "QEMU") with an A30 passed through.
    VmQemu,
    /// An A30 host whose DMI cannot be read (no /sys/class/dmi).
    DmiUnreadable,
    /// An A30 (0000:01:00.0) and an Intel I350 network card (0000:02:00.0, `igb`) in one IOMMU
    /// group, as on a board without ACS isolation: the card must not be passed through.
    A30SharedIommuGroup,
}

/// The addresses of the eight GPUs of `a100-sxm-x8`, as on a DGX A100.
pub const DGX_A100_GPU_ADDRESSES: [&str; 8] = [
    "0000:07:00.0",
    "0000:0f:00.0",
    "0000:47:00.0",
    "0000:4e:00.0",
    "0000:87:00.0",
    "0000:90:00.0",
    "0000:b7:00.0",
    "0000:bd:00.0",
];

/// The addresses of the eight GPUs of `h100-sxm-x8` (the mock machine `h100-sxm5-80gb-x8.yaml`).
pub const HGX_H100_GPU_ADDRESSES: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];

impl NamedHost {
    pub const ALL: [NamedHost; 9] = [
        Self::A30Pcie,
        Self::A100SxmX8,
        Self::H100Pcie,
        Self::H100SxmX8,
        Self::ConsumerWithAudio,
        Self::NonNvidiaGpu,
        Self::VmQemu,
        Self::DmiUnreadable,
        Self::A30SharedIommuGroup,
    ];

    /// The fixture's name, e.g. `a30-pcie`.
    pub fn name(self) -> &'static str {
        match self {
            Self::A30Pcie => "a30-pcie",
            Self::A100SxmX8 => "a100-sxm-x8",
            Self::H100Pcie => "h100-pcie",
            Self::H100SxmX8 => "h100-sxm-x8",
            Self::ConsumerWithAudio => "consumer-with-audio",
            Self::NonNvidiaGpu => "non-nvidia-gpu",
            Self::VmQemu => "vm-qemu",
            Self::DmiUnreadable => "dmi-unreadable",
            Self::A30SharedIommuGroup => "a30-nic-shared-group",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|host| host.name() == name)
    }

    /// Builds the fixture in a new temporary directory.
    pub fn build(self) -> HostTree {
        let host = HostTree::new();
        self.build_into(&host);
        host
    }

    /// Builds the fixture into an existing (empty) tree, e.g. one at a path an e2e test chose.
    pub fn build_into(self, host: &HostTree) {
        host.install_pci_ids();
        host.install_ubuntu_2204();
        host.write_kernel_release(UBUNTU_2204_KERNEL);
        match self {
            Self::A30Pcie => {
                host.write_dmi("PowerEdge R750xa", "Dell Inc.");
                place_behind_root_port(host, FixtureDevice::a30_pcie("0000:01:00.0").with_iommu_group(13));
            }
            Self::A100SxmX8 => {
                host.write_dmi("DGXA100 920-23687-2530-000", "NVIDIA");
                for (i, address) in DGX_A100_GPU_ADDRESSES.iter().enumerate() {
                    let gpu = FixtureDevice::a100_sxm4_80gb(address)
                        .with_numa_node(i as i32 / 2)
                        .with_iommu_group(40 + i as u32);
                    place_behind_root_port(host, gpu);
                }
            }
            Self::H100Pcie => {
                host.write_dmi("ProLiant DL380 Gen11", "HPE");
                let gpu = FixtureDevice::h100_pcie("0000:41:00.0")
                    .with_numa_node(0)
                    .with_iommu_group(28);
                place_behind_root_port(host, gpu);
            }
            Self::H100SxmX8 => {
                host.write_dmi("DGXH100", "NVIDIA");
                for (i, address) in HGX_H100_GPU_ADDRESSES.iter().enumerate() {
                    let gpu = FixtureDevice::h100_sxm5_80gb(address)
                        .with_numa_node(i as i32 / 2)
                        .with_iommu_group(60 + i as u32);
                    place_behind_root_port(host, gpu);
                }
            }
            Self::ConsumerWithAudio => {
                host.write_dmi("MS-7D25", "Micro-Star International Co., Ltd.");
                place_behind_root_port(host, FixtureDevice::rtx_4090("0000:01:00.0").with_iommu_group(12));
                host.place_device(&FixtureDevice::rtx_4090_audio("0000:01:00.1").with_iommu_group(12));
            }
            Self::NonNvidiaGpu => {
                host.write_dmi("X570 AORUS ELITE", "Gigabyte Technology Co., Ltd.");
                let gpu = FixtureDevice::radeon_rx_6900_xt("0000:0b:00.0").with_iommu_group(19);
                place_behind_root_port(host, gpu);
            }
            Self::VmQemu => {
                host.write_dmi("Standard PC (Q35 + ICH9, 2009)", "QEMU");
                let gpu = FixtureDevice::a30_pcie("0000:06:00.0").with_iommu_group(6);
                host.place_device(&qemu_root_port(&gpu.parent));
                host.place_device(&gpu);
            }
            Self::DmiUnreadable => {
                host.remove_dmi();
                place_behind_root_port(host, FixtureDevice::a30_pcie("0000:01:00.0").with_iommu_group(13));
            }
            Self::A30SharedIommuGroup => {
                host.write_dmi("PowerEdge R750xa", "Dell Inc.");
                place_behind_root_port(host, FixtureDevice::a30_pcie("0000:01:00.0").with_iommu_group(13));
                place_behind_root_port(host, FixtureDevice::i350_nic("0000:02:00.0").with_iommu_group(13));
            }
        }
        host.write_boot_id(FIXTURE_BOOT_ID);
        host.install_nvidia_driver_proc();
    }
}

/// Places `device` and, unless already there, the Intel root port above it,
/// so the bus also holds a non-GPU device, as every real one does.
fn place_behind_root_port(host: &HostTree, device: FixtureDevice) {
    if let Some(port_address) = upstream_port_address(&device.parent)
        && host.device(port_address).is_none()
    {
        host.place_device(&FixtureDevice::root_port(port_address));
    }
    host.place_device(&device);
}

/// QEMU's PCIe root port, pci.ids `1b36 000c QEMU PCIe Root port`.
fn qemu_root_port(parent: &str) -> FixtureDevice {
    let address = upstream_port_address(parent).unwrap_or("0000:00:01.0");
    FixtureDevice::new(address, CLASS_PCI_BRIDGE, 0x1b36, 0x000c, (0x1af4, 0x1100)).with_driver("pcieport")
}

/// The port's address: the last component of a parent path such as `pci0000:00/0000:00:07.0`.
fn upstream_port_address(parent: &str) -> Option<&str> {
    parent.rsplit('/').next().filter(|last| !last.starts_with("pci"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for host in NamedHost::ALL {
            assert_eq!(NamedHost::from_name(host.name()), Some(host));
        }
        assert_eq!(NamedHost::from_name("a30"), None);
    }

    #[test]
    fn the_dgx_fixture_has_eight_gpus_and_their_root_ports() {
        let host = NamedHost::A100SxmX8.build();
        let devices = host.devices();
        let gpus: Vec<_> = devices.iter().filter(|d| d.device == 0x20b2).collect();
        assert_eq!(gpus.len(), 8);
        assert_eq!(devices.len(), 16);
        assert_eq!(gpus[7].numa_node, 3);
        assert!(host.path("sys/kernel/iommu_groups/47/devices/0000:bd:00.0").exists());
    }
}
