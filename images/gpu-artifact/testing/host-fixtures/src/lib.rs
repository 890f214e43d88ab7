//! Fixture host trees (sysfs PCI devices, pci.ids, os-release, DMI, the
//! NVIDIA driver's `/proc` files, boot id) named for the hardware they
//! describe, with hotplug helpers that add or remove a device and produce the
//! uevent the kernel would send, and a [`KernelEmulator`] that applies
//! driver-binding writes to sysfs as the kernel would. Test-only.
//!
//! A tree is a directory laid out like a host's `/`: point the code under
//! test at [`HostTree::root`] instead of `/`. The named fixtures are
//! [`NamedHost`]; [`HostTree`] builds anything else device by device.
//!
//! This crate never reads the real host and is never a dependency of a
//! shipped binary.

mod fixture_device;
mod host_tree;
mod hotplug;
mod kernel_emulator;
mod kernel_uevent;
mod named_hosts;
mod nvidia_driver_proc;
mod sysfs_layout;
mod tool_stand_ins;

pub use fixture_device::{
    AMD, CLASS_3D, CLASS_AUDIO, CLASS_ETHERNET, CLASS_PCI_BRIDGE, CLASS_VGA, FixtureDevice, INTEL, NVIDIA,
};
pub use host_tree::{HostTree, PCI_IDS_EXCERPT, PCI_IDS_PATH};
pub use kernel_emulator::KernelEmulator;
pub use kernel_uevent::{KernelAction, UEventPayload, kernel_uevent};
pub use named_hosts::{DGX_A100_GPU_ADDRESSES, HGX_H100_GPU_ADDRESSES, NamedHost, UBUNTU_2204_KERNEL};
pub use nvidia_driver_proc::{FIXTURE_BOOT_ID, MIG_MINORS_PATH, mig_minors_table};
pub use tool_stand_ins::{STAND_INS_DIR, ToolStandIns};
