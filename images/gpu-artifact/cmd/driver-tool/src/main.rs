//! `<tool> [args...]` (a link named for the tool): runs the driver root's tool in a chroot; see the
//! crate's documentation. Environment: `DRIVER_ROOT_CTR_PATH` (default `/driver-root`) and the tool's
//! own, passed on unchanged.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use driver_tool::{DEFAULT_DRIVER_ROOT, carried, tool_name, tool_path};
use rustix::mount::MountPropagationFlags;

fn main() -> ExitCode {
    let mut args = std::env::args_os();
    let argv0 = args.next().unwrap_or_default();
    let Some(tool) = tool_name(&argv0).map(OsString::from) else {
        eprintln!("driver-tool: run it through a link named for the driver's tool (e.g. nvidia-smi)");
        return ExitCode::from(2);
    };
    let root =
        std::env::var_os("DRIVER_ROOT_CTR_PATH").map_or_else(|| PathBuf::from(DEFAULT_DRIVER_ROOT), PathBuf::from);
    let error = run(&root, &tool, args.collect());
    eprintln!("driver-tool {}: {error}", tool.to_string_lossy());
    // 127, as a shell says for a command it could not run.
    ExitCode::from(127)
}

/// Returns only when the tool could not be started.
fn run(root: &Path, tool: &OsString, args: Vec<OsString>) -> String {
    let program = match tool_path(root, tool) {
        Ok(program) => program,
        Err(error) => return error,
    };
    if let Err(error) = enter_private_mounts() {
        return format!("a mount namespace of its own: {error}");
    }
    for dir in carried(root, |var| std::env::var(var).ok()) {
        if let Err(error) = bind(&dir.source, &dir.target) {
            return format!("bind {} into the driver root: {error}", dir.source.display());
        }
    }
    if let Err(error) = std::os::unix::fs::chroot(root).and_then(|()| std::env::set_current_dir("/")) {
        return format!("chroot into {}: {error}", root.display());
    }
    let error = Command::new(&program).args(args).exec();
    format!("exec {} in the driver root: {error}", program.display())
}

/// A mount namespace of the process's own whose mounts never reach gpu-handler's or the host's.
#[allow(unsafe_code)]
fn enter_private_mounts() -> std::io::Result<()> {
    // SAFETY: only the mount namespace is unshared (not the file table, the flag `unshare_unsafe`
    // warns about), in a process that has started no other thread.
    unsafe { rustix::thread::unshare_unsafe(rustix::thread::UnshareFlags::NEWNS) }?;
    rustix::mount::mount_change("/", MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC)?;
    Ok(())
}

/// Binds `source` over `target` unless they are one directory already (a driver root that is the
/// host's own `/`, where the plugin directory of the container is the host's). A target the driver
/// root lacks is an error that names it: the tool would not see what its clients see.
fn bind(source: &Path, target: &Path) -> std::io::Result<()> {
    if !source.exists() {
        return Ok(());
    }
    let (Ok(from), Ok(to)) = (rustix::fs::stat(source), rustix::fs::stat(target)) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("the driver root has no {}", target.display()),
        ));
    };
    if (from.st_dev, from.st_ino) == (to.st_dev, to.st_ino) {
        return Ok(());
    }
    rustix::mount::mount_bind(source, target)?;
    Ok(())
}
