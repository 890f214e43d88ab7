//! A card's MPS control daemon gets the card's shared memory as its `/dev/shm`, as every client of
//! the card does through its CDI spec, so daemon and clients meet there and nothing else does. The
//! directory is the card's `shm` directory under the plugin directory: a tmpfs the handler mounts
//! while the daemon runs (`mps_shm`), which reaches the host through the Bidirectional mount of
//! `<plugin dir>/mps`. The handler starts the daemon through `<handler> mps-namespace <shm dir> --
//! <mps_control> ...`: a mount namespace of its own in which the directory is bound over
//! `/dev/shm` (the handler's own `/dev/shm` stays as it is).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use rustix::mount::MountPropagationFlags;

/// The handler's argument that makes it this launcher.
pub const MPS_NAMESPACE_COMMAND: &str = "mps-namespace";

/// Runs `command` with `shm` bound over `/dev/shm` in a new mount namespace (mount events do not
/// go back to the caller's). Returns only when that fails. Call before any other thread starts.
#[allow(unsafe_code)]
pub fn exec_in_mps_namespace(shm: &Path, command: &[OsString]) -> std::io::Error {
    let Some((program, args)) = command.split_first() else {
        return std::io::Error::other("no command to run");
    };
    // SAFETY: only the mount namespace is unshared (not the file table, the flag `unshare_unsafe`
    // warns about), in a process that has started no other thread.
    if let Err(error) = unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) } {
        return error.into();
    }
    let private = rustix::mount::mount_change("/", MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC)
        .and_then(|()| rustix::mount::mount_bind(shm, "/dev/shm"));
    if let Err(error) = private {
        return error.into();
    }
    Command::new(program).args(args).exec()
}
