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

/// The fixture's `proc/devices`: the running kernel's character and block majors with the driver's
/// (`nvidia`, `nvidia-uvm`, `nvidia-caps`) added to the character devices, as a GPU host's kernel lists
/// them once the modules are loaded. NVIDIA's tools read the majors there (the validator's `/dev/char`
/// links, nvidia-modprobe).
pub fn write_proc_devices(root: &Path) -> anyhow::Result<()> {
    let kernel = fs::read_to_string("/proc/devices").context("read /proc/devices")?;
    let driver = [
        (NVIDIA_MAJOR, "nvidia"),
        (NVIDIA_UVM_MAJOR, "nvidia-uvm"),
        (NVIDIA_CAPS_MAJOR, "nvidia-caps"),
    ];
    let mut out = String::new();
    let mut in_char = false;
    for line in kernel.lines() {
        if in_char && line.trim().is_empty() {
            for (major, name) in driver {
                out.push_str(&format!("{major:3} {name}\n"));
            }
        }
        in_char = line.starts_with("Character devices:") || (in_char && !line.trim().is_empty());
        out.push_str(line);
        out.push('\n');
    }
    let path = root.join("proc/devices");
    fs::create_dir_all(root.join("proc"))?;
    fs::write(&path, out).with_context(|| format!("write {}", path.display()))
}

pub fn char_device(path: &Path, major: u32, minor: u32) -> anyhow::Result<()> {
    mknodat(
        rustix::fs::CWD,
        path,
        FileType::CharacterDevice,
        Mode::from_raw_mode(0o666),
        makedev(major, minor),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_devices_lists_the_drivers_majors_among_the_character_devices() {
        let root = tempfile::tempdir().unwrap();
        write_proc_devices(root.path()).unwrap();
        let text = fs::read_to_string(root.path().join("proc/devices")).unwrap();
        let (chars, blocks) = text.split_once("Block devices:").expect("both sections kept");
        for line in ["195 nvidia", "510 nvidia-uvm", "511 nvidia-caps"] {
            assert!(chars.lines().any(|l| l.trim() == line), "{line} in {chars}");
            assert!(!blocks.contains(line));
        }
        assert!(
            chars.lines().any(|l| l.trim() == "1 mem"),
            "the kernel's own stay: {chars}"
        );
    }
}
