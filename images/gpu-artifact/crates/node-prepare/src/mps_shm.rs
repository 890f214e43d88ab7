//! A card's MPS shared memory: the `/dev/shm` of its control daemon and of every client, a tmpfs
//! of a fixed size mounted at `<plugin dir>/mps/<card>/shm` when the daemon starts and unmounted
//! when it stops, so what the clients write lives in memory (charged to the writer's cgroup, as
//! shmem is), never on the node's disk, stops at the limit with ENOSPC, and is gone with the
//! card's last share. The clients of one daemon must share it: the MPS server and its clients meet
//! in shared memory as well as in the pipe directory, which is why NVIDIA's DRA driver mounts one
//! tmpfs per daemon as the daemon's and its clients' `/dev/shm`. Only one namespace's claims use a
//! card's daemon at a time (`checks::shares`), so no tenant sees another's segments.
//!
//! The mount reaches the host (where containerd binds it into clients through the CDI spec)
//! because gpu-handler mounts `<plugin dir>/mps` with Bidirectional propagation; the daemon's
//! launcher sees it in the handler's mount namespace.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use rustix::mount::{MountFlags, UnmountFlags};

use crate::error::PrepareError;

/// The options of a card's tmpfs: its size in bytes and the mode of `/dev/shm` (world-writable,
/// sticky), as containers get it; no devices, set-uid files or executables on it.
fn tmpfs_options(size_bytes: u64) -> String {
    format!("size={size_bytes},mode=1777")
}

/// Whether `dir` is a mount point: it sits on another filesystem than its parent.
fn is_mount_point(dir: &Path) -> bool {
    let (Ok(own), Some(Ok(parent))) = (fs::metadata(dir), dir.parent().map(fs::metadata)) else {
        return false;
    };
    own.dev() != parent.dev()
}

/// Mounts a tmpfs of `size_bytes` at `dir` (which exists) unless one is there already: a daemon
/// started again for shares that remain finds their segments where they were.
pub(crate) fn mount_shm(dir: &Path, size_bytes: u64) -> Result<(), PrepareError> {
    if is_mount_point(dir) {
        return Ok(());
    }
    let options = std::ffi::CString::new(tmpfs_options(size_bytes))
        .map_err(|error| PrepareError::io("mount a tmpfs on", dir)(std::io::Error::other(error)))?;
    rustix::mount::mount(
        "gpu-mps-shm",
        dir,
        "tmpfs",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        options.as_c_str(),
    )
    .map_err(|error| PrepareError::io("mount a tmpfs on", dir)(error.into()))
}

/// Unmounts the tmpfs at `dir` when there is one; its contents are freed once the last container
/// that still binds it is gone (containers of unprepared claims have stopped).
pub(crate) fn unmount_shm(dir: &Path) -> Result<(), PrepareError> {
    if !is_mount_point(dir) {
        return Ok(());
    }
    rustix::mount::unmount(dir, UnmountFlags::DETACH)
        .map_err(|error| PrepareError::io("unmount the tmpfs at", dir)(error.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_options_limit_the_size_and_give_containers_their_usual_shm_mode() {
        assert_eq!(tmpfs_options(64 << 20), "size=67108864,mode=1777");
    }

    #[test]
    fn a_plain_directory_is_no_mount_point_and_unmounting_it_touches_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let shm = dir.path().join("shm");
        fs::create_dir(&shm).unwrap();
        fs::write(shm.join("segment"), b"x").unwrap();
        assert!(!is_mount_point(&shm));
        unmount_shm(&shm).unwrap();
        assert!(shm.join("segment").exists());
    }
}
