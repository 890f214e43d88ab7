//! The real node's createContainer hook (containerd's base spec gives it to every container): shows
//! the node's `/proc/driver` (the NVIDIA driver's files of the fixture host), `/proc/devices` and boot id in the
//! container's own `/proc`, as the kernel shows its files to every process. runc refuses mounts
//! inside `/proc` from the spec; a hook runs in the container's mount namespace before pivot_root,
//! where the node's `/proc` and the container's root are both reachable.

use anyhow::Context;
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

const SHOWN: [&str; 3] = ["proc/driver", "proc/devices", "proc/sys/kernel/random/boot_id"];

/// Reads the OCI state from stdin and binds the node's files over the container's.
pub fn run() -> anyhow::Result<()> {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    let state: Value = serde_json::from_str(&text).context("OCI state on stdin")?;
    let bundle = PathBuf::from(state["bundle"].as_str().context("state has no bundle")?);
    let config: Value = serde_json::from_slice(&std::fs::read(bundle.join("config.json"))?)?;
    let root = Path::new(config["root"]["path"].as_str().context("config has no root.path")?);
    let rootfs = if root.is_absolute() {
        root.to_path_buf()
    } else {
        bundle.join(root)
    };
    for path in SHOWN {
        let source = Path::new("/").join(path);
        let target = rootfs.join(path);
        if !source.exists() || !target.exists() {
            continue;
        }
        rustix::mount::mount_bind(&source, &target)
            .with_context(|| format!("mount --bind {} {}", source.display(), target.display()))?;
    }
    Ok(())
}
