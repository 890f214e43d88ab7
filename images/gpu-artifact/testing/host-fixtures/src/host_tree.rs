//! A fixture host: a directory laid out like the root of a Linux host, holding
//! only what the gpu module reads (sysfs PCI devices, pci.ids, os-release,
//! kernel release, DMI).
//!
//! Fixture helpers panic on I/O errors, with the path in the message: a
//! fixture that cannot be built is a broken test, not a case to handle.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tempfile::TempDir;

use crate::fixture_device::FixtureDevice;
use crate::sysfs_layout;

/// The pci.ids excerpt the fixtures use (see the file's header for its origin).
pub const PCI_IDS_EXCERPT: &str = include_str!("../fixtures/pci.ids");

/// Where hosts keep pci.ids; the first is Debian's and Ubuntu's.
pub const PCI_IDS_PATH: &str = "usr/share/misc/pci.ids";

/// A fixture host tree. The temporary directory (if any) lives as long as this value.
pub struct HostTree {
    root: PathBuf,
    _temp: Option<TempDir>,
    devices: Mutex<BTreeMap<String, FixtureDevice>>,
    seqnum: AtomicU64,
}

impl HostTree {
    /// An empty host in a new temporary directory: an empty PCI bus, nothing else.
    pub fn new() -> Self {
        let temp = tempfile::Builder::new()
            .prefix("host-fixture-")
            .tempdir()
            .expect("create a temporary directory for a fixture host");
        let mut tree = Self::at(temp.path());
        tree._temp = Some(temp);
        tree
    }

    /// An empty host laid out in `root` (created if missing), which the caller owns.
    pub fn at(root: &Path) -> Self {
        let tree = Self {
            root: root.to_path_buf(),
            _temp: None,
            devices: Mutex::new(BTreeMap::new()),
            // Any plausible value: the kernel's counter starts at boot and only grows.
            seqnum: AtomicU64::new(4000),
        };
        tree.create_dir("sys/bus/pci/devices");
        tree.create_dir("sys/bus/pci/drivers");
        tree.create_dir("sys/kernel/iommu_groups");
        tree
    }

    /// The host's `/`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `rel` (an absolute host path such as `/etc/os-release` or a relative one) inside the tree.
    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        let rel = rel.as_ref();
        self.root.join(rel.strip_prefix("/").unwrap_or(rel))
    }

    /// Writes a file, creating its parent directories.
    pub fn write_file(&self, rel: impl AsRef<Path>, contents: impl AsRef<[u8]>) {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|e| panic!("create {}: {e}", parent.display()));
        }
        fs::write(&path, contents).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// Removes a file, a symlink or a whole directory; a missing path is fine.
    pub fn remove(&self, rel: impl AsRef<Path>) {
        let path = self.path(rel);
        let result = match fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(&path),
            Ok(_) => fs::remove_file(&path),
            Err(_) => return,
        };
        result.unwrap_or_else(|e| panic!("remove {}: {e}", path.display()));
    }

    /// Installs the pci.ids excerpt where Debian and Ubuntu keep the database.
    pub fn install_pci_ids(&self) {
        self.write_file(PCI_IDS_PATH, PCI_IDS_EXCERPT);
    }

    /// `/etc/os-release` of Ubuntu 22.04 LTS, as the distribution ships it.
    pub fn install_ubuntu_2204(&self) {
        self.write_file(
            "etc/os-release",
            "PRETTY_NAME=\"Ubuntu 22.04.4 LTS\"\nNAME=\"Ubuntu\"\nVERSION_ID=\"22.04\"\n\
             VERSION=\"22.04.4 LTS (Jammy Jellyfish)\"\nVERSION_CODENAME=jammy\nID=ubuntu\n\
             ID_LIKE=debian\nHOME_URL=\"https://www.ubuntu.com/\"\nUBUNTU_CODENAME=jammy\n",
        );
    }

    /// `/proc/sys/kernel/osrelease`, what `uname -r` prints.
    pub fn write_kernel_release(&self, release: &str) {
        self.write_file("proc/sys/kernel/osrelease", format!("{release}\n"));
    }

    /// `/sys/class/dmi/id/product_name` and `sys_vendor`, newline-terminated as the kernel writes them.
    pub fn write_dmi(&self, product_name: &str, sys_vendor: &str) {
        self.write_file("sys/class/dmi/id/product_name", format!("{product_name}\n"));
        self.write_file("sys/class/dmi/id/sys_vendor", format!("{sys_vendor}\n"));
    }

    /// Removes the DMI directory, as on hosts without SMBIOS tables or with `/sys/class/dmi` masked.
    pub fn remove_dmi(&self) {
        self.remove("sys/class/dmi");
    }

    /// Puts a device in the tree as it is after boot, with no uevent.
    pub fn place_device(&self, device: &FixtureDevice) {
        sysfs_layout::create_device(&self.root, device);
        if let Some(driver) = &device.driver {
            sysfs_layout::link_driver(&self.root, device, driver);
        }
        self.devices_mut().insert(device.address.clone(), device.clone());
    }

    /// The device at `address` as the tree holds it now (driver included).
    pub fn device(&self, address: &str) -> Option<FixtureDevice> {
        self.devices_mut().get(address).cloned()
    }

    /// Every device in the tree, in address order.
    pub fn devices(&self) -> Vec<FixtureDevice> {
        self.devices_mut().values().cloned().collect()
    }

    pub(crate) fn devices_mut(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, FixtureDevice>> {
        self.devices.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn next_seqnum(&self) -> u64 {
        self.seqnum.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn create_dir(&self, rel: &str) {
        let path = self.path(rel);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    }
}

impl Default for HostTree {
    fn default() -> Self {
        Self::new()
    }
}
