//! The one place every host path is resolved: `/` in production, a fixture
//! tree in tests.

use std::path::{Path, PathBuf};

/// The host's root directory, under which every host path is read.
///
/// Symlinks inside the tree are followed as the OS follows them; real sysfs
/// uses relative links only, so a fixture tree never reaches outside its root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRoot {
    root: PathBuf,
}

impl HostRoot {
    /// The host seen at `root`: `/` on a node, `/host` when the node's root
    /// is mounted there, a fixture directory in tests.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The real host: `/`.
    pub fn host() -> Self {
        Self::new("/")
    }

    /// The root directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A host path (absolute like `/sys/bus/pci/devices` or relative like
    /// `sys/bus/pci/devices`) resolved under the root.
    pub fn path(&self, host_path: impl AsRef<Path>) -> PathBuf {
        let host_path = host_path.as_ref();
        self.root.join(host_path.strip_prefix("/").unwrap_or(host_path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_and_relative_host_paths_land_under_the_root() {
        let root = HostRoot::new("/tmp/fixture");
        assert_eq!(
            root.path("/etc/os-release"),
            PathBuf::from("/tmp/fixture/etc/os-release")
        );
        assert_eq!(
            root.path("sys/bus/pci/devices"),
            PathBuf::from("/tmp/fixture/sys/bus/pci/devices")
        );
        assert_eq!(
            HostRoot::host().path("/proc/sys/kernel/osrelease"),
            PathBuf::from("/proc/sys/kernel/osrelease")
        );
    }
}
