//! The kernel side of the real node's GPUs, for as long as the node is up (a node start is a boot):
//! sysfs back to the fixture's boot state, driver-binding writes applied as the kernel does
//! (`host_fixtures::KernelEmulator`), and a VFIO group's device node `/dev/vfio/<group>` present
//! exactly while every device of the group is bound to vfio-pci.

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use host_fixtures::{HostTree, KernelEmulator};

use super::compose;
use super::devices::{VFIO_GROUP_MAJOR, char_device};

const BOOT_ID: &str = "proc/sys/kernel/random/boot_id";

pub fn run_kernel(root: &Path, dev: &Path) -> anyhow::Result<()> {
    for owned in ["sys/bus/pci", "sys/kernel/iommu_groups", "sys/devices/pci0000:00"] {
        let path = root.join(owned);
        if path.exists() {
            fs::remove_dir_all(&path)?;
        }
    }
    // Composing writes the fixture's boot id; this boot keeps the one it has.
    let boot_id = fs::read(root.join(BOOT_ID)).ok();
    let host = HostTree::at(root);
    compose(&host);
    if let Some(boot_id) = boot_id {
        fs::write(root.join(BOOT_ID), boot_id)?;
    }
    let host = Arc::new(host);
    let _kernel = KernelEmulator::start(host.clone());
    eprintln!("kernel emulation of {} running", root.display());
    loop {
        sync_vfio_group_nodes(&host, dev);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sync_vfio_group_nodes(host: &HostTree, dev: &Path) {
    let Ok(groups) = fs::read_dir(host.path("sys/kernel/iommu_groups")) else {
        return;
    };
    for group in groups.filter_map(Result::ok) {
        let name = group.file_name().to_string_lossy().into_owned();
        let Ok(number) = name.parse::<u32>() else { continue };
        let members: Vec<_> = fs::read_dir(group.path().join("devices"))
            .map(|d| d.filter_map(Result::ok).collect())
            .unwrap_or_default();
        let on_vfio = !members.is_empty()
            && members.iter().all(|m| {
                fs::read_link(m.path().join("driver"))
                    .is_ok_and(|target| target.file_name().is_some_and(|n| n == "vfio-pci"))
            });
        let node = dev.join("vfio").join(&name);
        if on_vfio && !node.exists() {
            if let Err(error) = char_device(&node, VFIO_GROUP_MAJOR, number) {
                eprintln!("{error:#}");
            }
        } else if !on_vfio && node.exists() {
            let _ = fs::remove_file(&node);
        }
    }
}
