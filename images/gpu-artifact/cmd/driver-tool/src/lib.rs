//! driver-tool runs one of the NVIDIA driver's tools (`nvidia-smi`, `nvidia-cuda-mps-control`) from the
//! driver root, in a chroot into it, as NVIDIA's validator (`chroot /run/nvidia/driver nvidia-smi`) and
//! its device plugin's MPS daemon run them. The tool then gets the host's own loader and libc, which
//! belong together, and finds its sibling binaries where it expects them (the MPS control daemon starts
//! `nvidia-cuda-mps-server` from the driver's directory, which a chroot keeps and a foreign loader would
//! not: /proc/self/exe would be the loader). Never the image's loader with the host's libc: a loader and a
//! libc of different glibc builds fail at start (`GLIBC_PRIVATE` or relocation errors).
//!
//! gpu-handler's image holds this binary under each tool's name (`/app/driver-tools/<tool>`), and
//! `NVIDIA_SMI` / `NVIDIA_MPS_CONTROL` name those, so gpu-handler runs them as any other program.
//! What the tool shares with gpu-handler and the containers is bound into the driver root first, in a
//! mount namespace of the tool's own: `/dev/shm` (the card's shared memory an MPS daemon and its clients
//! meet in, which gpu-handler's `mps-namespace` bound there) and the MPS pipe and log directories its
//! environment names. This file holds the decisions; `main.rs` the system calls.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The driver root's mount point in gpu-handler's container (`DRIVER_ROOT_CTR_PATH`).
pub const DEFAULT_DRIVER_ROOT: &str = "/driver-root";

/// Where a driver installs its tools, relative to its root, in the order they are looked for.
const TOOL_DIRS: [&str; 4] = ["usr/bin", "usr/sbin", "bin", "sbin"];

/// The environment variables naming directories an MPS daemon shares with its clients.
pub const SHARED_DIR_VARS: [&str; 2] = ["CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"];

/// The tool a link named `argv0` stands for: its file name.
pub fn tool_name(argv0: &OsStr) -> Option<&OsStr> {
    Path::new(argv0).file_name().filter(|name| *name != "driver-tool")
}

/// The tool's path inside the driver root (what the chrooted exec runs): the first of the tool
/// directories that has an entry of that name. An entry may be a symlink, absolute in the root's own
/// terms, so only its existence is asked here; the chroot resolves it.
pub fn tool_path(root: &Path, tool: &OsStr) -> Result<PathBuf, String> {
    TOOL_DIRS
        .iter()
        .map(|dir| Path::new("/").join(dir).join(tool))
        .find(|inside| {
            root.join(inside.strip_prefix("/").unwrap_or(inside))
                .symlink_metadata()
                .is_ok()
        })
        .ok_or_else(|| {
            format!(
                "the driver root {} has no {} in {}",
                root.display(),
                tool.to_string_lossy(),
                TOOL_DIRS.join(", ")
            )
        })
}

/// A directory to bind into the driver root before the chroot: the container's `source` at the same
/// path inside the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    pub source: PathBuf,
    pub target: PathBuf,
}

/// What is bound into the root: `/dev/shm`, and each directory the environment names for sharing.
pub fn carried(root: &Path, env: impl Fn(&str) -> Option<String>) -> Vec<Carried> {
    let mut dirs = vec![PathBuf::from("/dev/shm")];
    dirs.extend(
        SHARED_DIR_VARS
            .iter()
            .filter_map(|var| env(var))
            .filter(|dir| dir.starts_with('/'))
            .map(PathBuf::from),
    );
    dirs.into_iter()
        .map(|source| Carried {
            target: root.join(source.strip_prefix("/").unwrap_or(&source)),
            source,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_names_its_tool_and_the_binary_itself_names_none() {
        assert_eq!(
            tool_name(OsStr::new("/app/driver-tools/nvidia-smi")),
            Some(OsStr::new("nvidia-smi"))
        );
        assert_eq!(tool_name(OsStr::new("/app/driver-tool")), None);
    }

    #[test]
    fn the_tool_is_found_in_the_roots_own_directories() {
        let root = std::env::temp_dir().join(format!("driver-tool-test-{}", std::process::id()));
        std::fs::create_dir_all(root.join("usr/sbin")).unwrap();
        // An absolute symlink, as a distribution's package makes: it resolves only inside the root.
        let link = root.join("usr/sbin/nvidia-smi");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/usr/lib/nvidia/nvidia-smi", &link).unwrap();
        assert_eq!(
            tool_path(&root, OsStr::new("nvidia-smi")),
            Ok(PathBuf::from("/usr/sbin/nvidia-smi"))
        );
        let missing = tool_path(&root, OsStr::new("nvidia-cuda-mps-control")).unwrap_err();
        assert!(missing.contains("no nvidia-cuda-mps-control"), "{missing}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn shared_memory_and_the_mps_directories_are_carried_into_the_root() {
        let env = |var: &str| (var == "CUDA_MPS_PIPE_DIRECTORY").then(|| "/var/lib/kubelet/plugins/x/pipe".to_owned());
        let carried = carried(Path::new("/driver-root"), env);
        assert_eq!(
            carried,
            [
                Carried {
                    source: "/dev/shm".into(),
                    target: "/driver-root/dev/shm".into()
                },
                Carried {
                    source: "/var/lib/kubelet/plugins/x/pipe".into(),
                    target: "/driver-root/var/lib/kubelet/plugins/x/pipe".into()
                },
            ]
        );
    }
}
