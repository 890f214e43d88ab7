//! A listening socket of a process (a component, or the test itself) shut down under its server,
//! as a kernel failure or a stray close would leave it: the socket is found by the path it is bound
//! to, a copy of its descriptor is taken from the process (pidfd_getfd, Linux 5.6) and shut down, so
//! the server accepts nothing from then on.

use std::path::Path;

use rustix::net::Shutdown;
use rustix::process::{Pid, PidfdFlags, PidfdGetfdFlags, pidfd_getfd, pidfd_open};

/// The inode of the listening Unix socket bound to `path` in the network namespace of `pid`.
fn listening_inode(pid: u32, path: &Path) -> Option<u64> {
    // Num RefCount Protocol Flags Type St Inode Path; St 01 is a listening socket.
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/unix")).ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (state, inode, bound) = (fields.get(5)?, fields.get(6)?, fields.get(7)?);
        (*state == "01" && Path::new(bound) == path).then(|| inode.parse().ok())?
    })
}

/// The descriptor number of the socket with `inode` in process `pid`.
fn descriptor_of(pid: u32, inode: u64) -> Option<i32> {
    let wanted = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.find_map(|entry| {
        let entry = entry.ok()?;
        let target = std::fs::read_link(entry.path()).ok()?;
        (target.to_str() == Some(wanted.as_str())).then(|| entry.file_name().to_str()?.parse().ok())?
    })
}

/// Shuts down the listening socket process `pid` (a child of the test, or the test itself) has
/// bound to `path`; panics naming what is missing.
pub fn close_listener(pid: u32, path: &Path) {
    let inode =
        listening_inode(pid, path).unwrap_or_else(|| panic!("no socket of pid {pid} listens on {}", path.display()));
    let fd = descriptor_of(pid, inode).unwrap_or_else(|| panic!("pid {pid} holds no descriptor of socket {inode}"));
    let process = Pid::from_raw(i32::try_from(pid).unwrap()).unwrap();
    let pidfd = pidfd_open(process, PidfdFlags::empty()).unwrap();
    let copy = pidfd_getfd(&pidfd, fd, PidfdGetfdFlags::empty()).unwrap();
    rustix::net::shutdown(&copy, Shutdown::Both).unwrap();
}
