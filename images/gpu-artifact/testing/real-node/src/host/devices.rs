//! The device nodes the NVIDIA driver (and `nvidia-modprobe`) makes on a GPU host, made with mknod in
//! the node's own `/dev`: one per card (`nvidia<minor>`, the minors the driver publishes in
//! `/proc/driver/nvidia/gpus/*/information`), the control and UVM nodes, the MIG capability nodes of
//! every GPU instance and compute instance the driver's table lists for those cards, and VFIO's
//! container node. A VFIO group's node appears when its devices are bound to vfio-pci (`kernel`).

use std::fs;
use std::path::Path;

use anyhow::Context;
use rustix::fs::{FileType, Mode, makedev, mknodat};

pub const NVIDIA_MAJOR: u32 = 195;
const NVIDIACTL_MINOR: u32 = 255;
/// Majors the kernel hands out dynamically; these are typical values.
const NVIDIA_UVM_MAJOR: u32 = 510;
pub const NVIDIA_CAPS_MAJOR: u32 = 511;
pub const VFIO_GROUP_MAJOR: u32 = 509;
const MISC_MAJOR: u32 = 10;
const VFIO_MINOR: u32 = 196;

/// GPU instances and compute instances per GPU in the driver's capability table.
const GPU_INSTANCES: u32 = 15;
const COMPUTE_INSTANCES: u32 = 8;

pub fn make_device_nodes(root: &Path, dev: &Path) -> anyhow::Result<()> {
    let minors = card_minors(root)?;
    for minor in &minors {
        char_device(&dev.join(format!("nvidia{minor}")), NVIDIA_MAJOR, *minor)?;
    }
    char_device(&dev.join("nvidiactl"), NVIDIA_MAJOR, NVIDIACTL_MINOR)?;
    char_device(&dev.join("nvidia-uvm"), NVIDIA_UVM_MAJOR, 0)?;
    char_device(&dev.join("nvidia-uvm-tools"), NVIDIA_UVM_MAJOR, 1)?;
    let caps = dev.join("nvidia-caps");
    fs::create_dir_all(&caps)?;
    char_device(&caps.join("nvidia-cap1"), NVIDIA_CAPS_MAJOR, 1)?;
    char_device(&caps.join("nvidia-cap2"), NVIDIA_CAPS_MAJOR, 2)?;
    for gpu in &minors {
        for gi in 0..GPU_INSTANCES {
            for ci in 0..COMPUTE_INSTANCES {
                let (gi_minor, ci_minor) = mock_nvml::machine::mig_capability_minors(*gpu, gi, ci);
                for minor in [gi_minor, ci_minor] {
                    let path = caps.join(format!("nvidia-cap{minor}"));
                    if !path.exists() {
                        char_device(&path, NVIDIA_CAPS_MAJOR, minor)?;
                    }
                }
            }
        }
    }
    fs::create_dir_all(dev.join("vfio"))?;
    char_device(&dev.join("vfio/vfio"), MISC_MAJOR, VFIO_MINOR)?;
    Ok(())
}

pub fn char_device(path: &Path, major: u32, minor: u32) -> anyhow::Result<()> {
    mknodat(rustix::fs::CWD, path, FileType::CharacterDevice, Mode::from_raw_mode(0o666), makedev(major, minor))
        .with_context(|| format!("mknod {path:?} c {major} {minor}"))?;
    Ok(())
}

/// The `Device Minor:` of every card the driver publishes.
fn card_minors(root: &Path) -> anyhow::Result<Vec<u32>> {
    let gpus = root.join("proc/driver/nvidia/gpus");
    let mut minors = Vec::new();
    for entry in fs::read_dir(&gpus).with_context(|| format!("read {}", gpus.display()))? {
        let text = fs::read_to_string(entry?.path().join("information"))?;
        if let Some(minor) = text
            .lines()
            .find_map(|l| l.strip_prefix("Device Minor:"))
            .and_then(|m| m.trim().parse().ok())
        {
            minors.push(minor);
        }
    }
    minors.sort_unstable();
    Ok(minors)
}
