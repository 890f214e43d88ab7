//! The driver's files every GPU container gets besides its device nodes, without any NVIDIA runtime
//! (what NVIDIA's CDI specs carry): the driver's user-space libraries and tools, bind-mounted
//! read-only from the driver root at the same path in the container, and a createContainer hook
//! that makes the container's dynamic linker find the libraries (`update-ldcache`).
//!
//! The libraries are the compute and utility set of the driver (`libcuda.so.<version>`,
//! `libnvidia-ml.so.<version>`, ...), taken under their versioned file names from the library
//! folders a driver installs into; the soname links are made in the container by `ldconfig`.

use std::fs;
use std::path::PathBuf;

use crate::cdi_spec::{CdiHook, ContainerEdits};
use crate::error::PrepareError;

/// Where this process sees the driver root and where the host has it (what the CDI spec names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DriverFiles {
    /// E.g. `/driver-root`, the chart's mount of `nvidiaDriverRoot`.
    pub root_here: PathBuf,
    /// `nvidiaDriverRoot` itself (`/` for a driver installed on the host).
    pub root_on_host: PathBuf,
    /// The hook binary as the runtime (on the host) finds it; `None`: no hook.
    pub ld_cache_hook: Option<PathBuf>,
}

/// Library folders of a driver install (Debian-like, then RHEL-like).
const LIBRARY_DIRS: [&str; 4] = ["usr/lib/x86_64-linux-gnu", "usr/lib64", "lib/x86_64-linux-gnu", "lib64"];

/// The driver's compute and utility libraries, by name before `.so`.
const LIBRARIES: [&str; 11] = [
    "libcuda",
    "libcudadebugger",
    "libnvidia-ml",
    "libnvidia-ptxjitcompiler",
    "libnvidia-nvvm",
    "libnvidia-opencl",
    "libnvidia-cfg",
    "libnvidia-gpucomp",
    "libnvidia-allocator",
    "libnvidia-pkcs11",
    "libnvidia-pkcs11-openssl3",
];

const TOOLS: [&str; 5] = [
    "nvidia-smi",
    "nvidia-debugdump",
    "nvidia-persistenced",
    "nvidia-cuda-mps-control",
    "nvidia-cuda-mps-server",
];

impl DriverFiles {
    /// The mounts and hook of every container of a GPU claim.
    pub(crate) fn edits(&self) -> Result<ContainerEdits, PrepareError> {
        let mut edits = ContainerEdits::default();
        let mut folders = Vec::new();
        for dir in LIBRARY_DIRS {
            let libraries = self.libraries_in(dir)?;
            if !libraries.is_empty() {
                folders.push(format!("/{dir}"));
            }
            for name in libraries {
                let relative = format!("{dir}/{name}");
                edits
                    .mounts
                    .push((self.on_host(&relative), format!("/{relative}"), true));
            }
        }
        for tool in TOOLS {
            let relative = format!("usr/bin/{tool}");
            if self.root_here.join(&relative).is_file() {
                edits
                    .mounts
                    .push((self.on_host(&relative), format!("/{relative}"), true));
            }
        }
        if let Some(hook) = self.ld_cache_hook.as_ref().filter(|_| !folders.is_empty()) {
            let mut args = vec!["gpu-cdi-hook".to_owned(), "update-ldcache".to_owned()];
            for folder in folders {
                args.extend(["--folder".to_owned(), folder]);
            }
            edits.hooks.push(CdiHook {
                path: hook.display().to_string(),
                args,
            });
        }
        Ok(edits)
    }

    /// The driver libraries of `dir` under their versioned file names, sorted.
    fn libraries_in(&self, dir: &str) -> Result<Vec<String>, PrepareError> {
        let path = self.root_here.join(dir);
        let entries = match fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(PrepareError::io("read directory", &path)(error)),
        };
        let mut found: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|entry| entry.file_type().is_ok_and(|t| t.is_file()))
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| is_driver_library(name))
            .collect();
        found.sort();
        Ok(found)
    }

    fn on_host(&self, relative: &str) -> String {
        self.root_on_host.join(relative).display().to_string()
    }
}

/// `libcuda.so.580.76.05`: a known library with a numeric version after `.so.`.
fn is_driver_library(name: &str) -> bool {
    LIBRARIES.iter().any(|library| {
        name.strip_prefix(library)
            .and_then(|rest| rest.strip_prefix(".so."))
            .is_some_and(|version| !version.is_empty() && version.split('.').all(|p| p.parse::<u32>().is_ok()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versioned_driver_libraries_and_tools_are_mounted_and_the_hook_names_their_folder() {
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("usr/lib/x86_64-linux-gnu");
        fs::create_dir_all(&lib).unwrap();
        fs::create_dir_all(root.path().join("usr/bin")).unwrap();
        for name in [
            "libcuda.so.580.76.05",
            "libnvidia-ml.so.580.76.05",
            "libc.so.6",
            "libnvidia-ml.so.bak",
        ] {
            fs::write(lib.join(name), b"\x7fELF").unwrap();
        }
        std::os::unix::fs::symlink("libcuda.so.580.76.05", lib.join("libcuda.so.1")).unwrap();
        fs::write(root.path().join("usr/bin/nvidia-smi"), b"").unwrap();
        let driver = DriverFiles {
            root_here: root.path().to_path_buf(),
            root_on_host: PathBuf::from("/run/nvidia/driver"),
            ld_cache_hook: Some(PathBuf::from("/var/lib/kubelet/plugins/gpu.deckhouse.io/gpu-cdi-hook")),
        };
        let edits = driver.edits().unwrap();
        let mounts: Vec<(&str, &str)> = edits.mounts.iter().map(|(h, c, _)| (h.as_str(), c.as_str())).collect();
        assert_eq!(
            mounts,
            [
                (
                    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libcuda.so.580.76.05",
                    "/usr/lib/x86_64-linux-gnu/libcuda.so.580.76.05"
                ),
                (
                    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.76.05",
                    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.580.76.05"
                ),
                ("/run/nvidia/driver/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"),
            ]
        );
        assert!(edits.mounts.iter().all(|(_, _, read_only)| *read_only));
        assert_eq!(
            edits.hooks,
            [CdiHook {
                path: "/var/lib/kubelet/plugins/gpu.deckhouse.io/gpu-cdi-hook".into(),
                args: vec![
                    "gpu-cdi-hook".into(),
                    "update-ldcache".into(),
                    "--folder".into(),
                    "/usr/lib/x86_64-linux-gnu".into()
                ],
            }]
        );
    }

    #[test]
    fn an_empty_driver_root_gives_nothing() {
        let root = tempfile::tempdir().unwrap();
        let driver = DriverFiles {
            root_here: root.path().to_path_buf(),
            root_on_host: PathBuf::from("/"),
            ld_cache_hook: Some(PathBuf::from("/hook")),
        };
        assert_eq!(driver.edits().unwrap(), ContainerEdits::default());
    }
}
