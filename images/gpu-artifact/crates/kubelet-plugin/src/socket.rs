//! Unix sockets that survive restarts: a socket file left by a crashed process is replaced, a
//! socket another live process serves is never taken over, and on shutdown only our own socket
//! file is removed (a successor may already have bound a new one at the same path). Only the
//! owner (root, the kubelet) may connect: a socket appears at its path already 0600, whatever the
//! process's umask.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("socket {path}: another live process is serving it (is a second plugin instance running?)")]
    InUse { path: PathBuf },
    #[error("socket {path}: {action}: {source}")]
    Io {
        path: PathBuf,
        action: &'static str,
        source: io::Error,
    },
}

/// A socket file we bound, identified so that we never remove a successor's: the inode number
/// alone is not enough (a successor's file often reuses the freed inode), its change time tells
/// the two files apart.
#[derive(Debug, Clone)]
pub(crate) struct BoundSocket {
    path: PathBuf,
    identity: FileIdentity,
}

type FileIdentity = (u64, u64, i64, i64);

fn identity(metadata: &std::fs::Metadata) -> FileIdentity {
    (metadata.dev(), metadata.ino(), metadata.ctime(), metadata.ctime_nsec())
}

impl BoundSocket {
    /// Binds `path`, creating its directory and replacing a stale socket file; the listener is
    /// non-blocking.
    pub(crate) async fn bind(path: &Path) -> Result<(std::os::unix::net::UnixListener, Self), SocketError> {
        let io_error = |action| {
            let path = path.to_owned();
            move |source| SocketError::Io { path, action, source }
        };
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(io_error("creating its directory"))?;
        }
        match UnixStream::connect(path).await {
            Ok(_) => return Err(SocketError::InUse { path: path.to_owned() }),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            // Refused: nobody listens, the file is what a crashed process left behind.
            Err(_) => match tokio::fs::remove_file(path).await {
                Ok(()) => tracing::info!(socket = %path.display(), "removed a stale socket file"),
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(io_error("removing the stale file")(error)),
            },
        }
        let listener = bind_private(path).map_err(io_error("binding"))?;
        let metadata = std::fs::metadata(path).map_err(io_error("reading the bound file"))?;
        let socket = Self {
            path: path.to_owned(),
            identity: identity(&metadata),
        };
        Ok((listener, socket))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file at its path is still the socket we bound (not removed, not replaced): only
    /// then can the kubelet reach it.
    pub(crate) fn in_place(&self) -> bool {
        std::fs::metadata(&self.path).is_ok_and(|metadata| identity(&metadata) == self.identity)
    }

    /// Removes the socket file if it is still the one we bound.
    pub(crate) fn remove(&self) {
        match std::fs::metadata(&self.path) {
            Ok(metadata) if identity(&metadata) == self.identity => {
                if let Err(error) = std::fs::remove_file(&self.path) {
                    tracing::warn!(socket = %self.path.display(), %error, "could not remove the socket file");
                }
            }
            Ok(_) => tracing::info!(socket = %self.path.display(), "socket file belongs to a successor; left in place"),
            Err(_) => {}
        }
    }
}

/// Binds and listens on `path` with mode 0600 from its first moment: the socket's own inode is
/// narrowed before the bind, and Linux gives the file it binds that mode less the umask
/// (`unix_bind` in net/unix/af_unix.c), which no sane umask narrows further. No window in which
/// the file is wider, and no temporary name the kubelet's plugin watcher would see.
fn bind_private(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC | SocketFlags::NONBLOCK,
        None,
    )?;
    rustix::fs::fchmod(&socket, rustix::fs::Mode::from_raw_mode(0o600))?;
    rustix::net::bind(&socket, &SocketAddrUnix::new(path)?)?;
    rustix::net::listen(&socket, LISTEN_BACKLOG)?;
    Ok(std::os::unix::net::UnixListener::from(socket))
}

/// The backlog of a listening socket (Go's and tokio's default on Linux).
const LISTEN_BACKLOG: i32 = 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn removing_leaves_a_successors_socket_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/a.sock");
        let (first_listener, first) = BoundSocket::bind(&path).await.unwrap();
        // The first process stops listening without cleaning up (as after a crash); a successor binds.
        drop(first_listener);
        // Past the file system's timestamp granularity, as any real restart is.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let (_listener, second) = BoundSocket::bind(&path).await.unwrap();
        first.remove();
        assert!(
            path.exists(),
            "the successor's socket must survive the predecessor's cleanup"
        );
        second.remove();
        assert!(!path.exists(), "the owner removes its own socket");
    }

    #[tokio::test]
    async fn a_live_socket_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.sock");
        let (_listener, _socket) = BoundSocket::bind(&path).await.unwrap();
        let error = BoundSocket::bind(&path).await.unwrap_err();
        assert!(
            matches!(&error, SocketError::InUse { path: p } if p == &path),
            "{error}"
        );
    }
}
