//! The real node's host: the fixture host of an 8 x H100 SXM5 node with an A30 besides (so MIG
//! profiles of both models, whole cards, shares and VFIO all have a card), laid out where the node's
//! namespaces show it (`sys`, `proc/driver`, `proc/sys/kernel/random/boot_id`), the driver installed
//! on the host (the `usr` tree laid over the machine's `/usr`: nvidia-smi, the libraries, pci.ids, and
//! a glibc build of the host's own that is not the images'), and the mock NVML's machine description.

mod devices;
mod driver_root;
mod host_glibc;
mod kernel;
mod kernel_modules;
mod reboot;

use std::path::Path;

use host_fixtures::{FixtureDevice, HostTree, NamedHost};

pub use devices::{make_device_nodes, write_proc_devices};
pub use driver_root::{DRIVER_VERSION, install_driver_root};
pub use kernel::run_kernel;
pub use kernel_modules::{DRIVER_MODULES, install_driver_modules};
pub use reboot::reboot;

/// The A30 beside the eight H100s: after them in PCI order, so it is device minor 8.
pub const A30_ADDRESS: &str = "0000:e1:00.0";
const A30_ROOT_PORT: &str = "0000:00:08.0";
const A30_IOMMU_GROUP: u32 = 70;

/// Where the fixture keeps the mock NVML's machine description (copied to `/run/gpu-mock-nvml`).
pub const MOCK_NVML_DIR: &str = "mock-nvml";

/// The node's PCI devices, driver `/proc` files and boot id in `host` (sysfs as after a boot).
pub fn compose(host: &HostTree) {
    NamedHost::H100SxmX8.build_into(host);
    host.place_device(&FixtureDevice::root_port(A30_ROOT_PORT));
    host.place_device(
        &FixtureDevice::a30_pcie(A30_ADDRESS)
            .with_numa_node(3)
            .with_iommu_group(A30_IOMMU_GROUP),
    );
    host.install_nvidia_driver_proc();
}

/// The whole fixture host in `root`: devices, driver root, mock NVML machine.
pub fn build(root: &Path, tools: &Path) -> anyhow::Result<()> {
    let host = HostTree::at(root);
    compose(&host);
    install_driver_root(&host, tools)?;
    host_glibc::install_host_glibc(root)?;
    install_driver_modules(&root.join("usr"))?;
    write_proc_devices(root)?;
    driver_root::install_mock_machine(&host)?;
    Ok(())
}

/// The NVIDIA cards of `host` in device-minor order (PCI order of the cards bound to `nvidia`).
pub fn nvidia_cards(host: &HostTree) -> Vec<FixtureDevice> {
    host.devices()
        .into_iter()
        .filter(|d| d.vendor == host_fixtures::NVIDIA && (0x0300..0x0400).contains(&(d.class >> 8)))
        .collect()
}
