//! The NVIDIA kernel modules as the host's `modprobe` sees them. On a GPU host the driver's modules
//! are installed and loaded, so `modprobe nvidia` (which NVIDIA's validator runs in the host's root
//! before it makes the `/dev/char` links) succeeds at once. No kernel module can be loaded here; the
//! fixture lists the three modules as built into the running kernel, which `modprobe` answers the
//! same way, with the indexes `depmod` makes from that list.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The modules NVIDIA's tools load before they touch the cards.
pub const DRIVER_MODULES: [&str; 3] = ["nvidia", "nvidia-uvm", "nvidia-modeset"];

/// `<usr>/lib/modules/<running kernel>`, where `/lib/modules` is on a merged-`/usr` host.
pub fn modules_dir(usr: &Path) -> anyhow::Result<PathBuf> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").context("the running kernel's release")?;
    Ok(usr.join("lib/modules").join(release.trim()))
}

/// Writes the module list and runs `depmod` over the fixture's `usr`.
pub fn install_driver_modules(usr: &Path) -> anyhow::Result<()> {
    let dir = modules_dir(usr)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let builtin: String = DRIVER_MODULES
        .iter()
        .map(|m| format!("kernel/drivers/video/{m}.ko\n"))
        .collect();
    std::fs::write(dir.join("modules.builtin"), builtin)?;
    std::fs::write(dir.join("modules.order"), "")?;
    let release = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
    let out = Command::new("depmod")
        .arg("-b")
        .arg(usr)
        .arg(&release)
        .output()
        .context("run depmod (Debian package kmod; tools/install/node-deps.sh installs it)")?;
    if !out.status.success() {
        bail!(
            "depmod -b {} {release}: {}",
            usr.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modprobe_finds_every_driver_module_in_the_fixture() {
        let root = tempfile::tempdir().unwrap();
        let usr = root.path().join("usr");
        install_driver_modules(&usr).unwrap();
        let dir = modules_dir(&usr).unwrap();
        assert!(dir.join("modules.builtin.bin").is_file(), "depmod wrote its index");
        for module in DRIVER_MODULES {
            let out = Command::new("modprobe")
                .arg("-d")
                .arg(&usr)
                .arg("--show-depends")
                .arg(module)
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && said.contains("builtin"),
                "{module}: {said} {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = Command::new("modprobe")
            .arg("-d")
            .arg(&usr)
            .arg("--show-depends")
            .arg("nouveau")
            .output()
            .unwrap();
        assert!(!out.status.success(), "a module the fixture has not is not found");
    }
}
