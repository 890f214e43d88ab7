//! Whether the plugin's servers still serve: what each accepts, retried through the transient
//! failures of accept (out of descriptors or memory, a connection aborted before it was taken),
//! and, when a server stops before shutdown (its listener failed or was shut down, its socket file
//! was removed), why, for the handler's readiness and its log. A node whose DRA or registration
//! server stopped prepares nothing while the kubelet still counts on it; it must say so.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use component_base::Readiness;
use futures::Stream;
use rustix::io::Errno;
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::net::UnixStream;
use tokio::sync::watch;

use crate::socket::BoundSocket;
use crate::uds_authority::LocalAuthority;

/// The readiness gate that is open while both servers serve.
pub const SERVING_GATE: &str = "kubelet-plugin-serving";

/// The first pause after a transient accept failure, and the longest (Go's net/http's).
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const LONGEST_PAUSE: Duration = Duration::from_secs(1);

/// How often a server looks whether its socket file is still the one it bound.
const SOCKET_CHECK: Duration = Duration::from_secs(5);

/// Where a server says that it stopped serving, shared by both servers: the reasons, joined.
#[derive(Clone)]
pub(crate) struct StopReport(Arc<watch::Sender<Option<String>>>);

impl StopReport {
    pub(crate) fn new() -> (Self, watch::Receiver<Option<String>>) {
        let (sender, receiver) = watch::channel(None);
        (StopReport(Arc::new(sender)), receiver)
    }

    /// Logs and records that `server` stopped serving, and why. Said once the server stops
    /// accepting, not when it returns: it drains the connections it has first (the kubelet's
    /// health stream, say), which may never close.
    pub(crate) fn stopped(&self, server: &str, why: &str) {
        let reason = format!("the {server} server stopped: {why}");
        tracing::error!(server, %reason, "the kubelet plugin no longer serves; gpu-handler is not ready");
        self.0.send_modify(|stopped| {
            *stopped = Some(match stopped.take() {
                Some(earlier) => format!("{earlier}; {reason}"),
                None => reason,
            })
        });
    }
}

/// The connections `listener` (non-blocking, bound at `socket`) accepts, as the server reads them.
/// Transient failures are logged and retried after a growing pause. The stream ends, and `report`
/// says why, when accept fails otherwise, when the listening socket was shut down under it (a
/// non-blocking accept then only says "try again" while the socket reports its read side closed),
/// or when its socket file was removed or replaced (the kubelet can no longer reach it).
pub(crate) fn connections(
    listener: std::os::unix::net::UnixListener,
    socket: BoundSocket,
    server: &'static str,
    report: StopReport,
) -> io::Result<impl Stream<Item = io::Result<LocalAuthority>>> {
    // tokio's own UnixListener cannot be used: on a listening socket shut down under it, accept
    // says "try again" while the socket stays read-closed, and its accept spins inside one poll.
    // `with_interest` is deprecated for types that may not own their descriptor (tokio#8587); a
    // std UnixListener owns it, and the AsyncFd owns the listener until both are dropped.
    #[allow(deprecated)]
    let listener = AsyncFd::with_interest(listener, Interest::READABLE)?;
    // Nothing accepts on the socket any more: its file goes at once, so the kubelet finds no plugin
    // rather than one that never answers (the server drains what it has first).
    let end = {
        let socket = socket.clone();
        move |why: String| {
            socket.remove();
            report.stopped(server, &why);
        }
    };
    Ok(futures::stream::unfold(Some((listener, socket)), move |state| {
        let end = end.clone();
        async move {
            let (listener, socket) = state?;
            let mut pause = Duration::ZERO;
            let mut check = tokio::time::interval(SOCKET_CHECK);
            loop {
                let mut ready = tokio::select! {
                    _ = check.tick() => {
                        if !socket.in_place() {
                            end(format!(
                                "its socket file {} was removed or replaced, so the kubelet cannot reach it",
                                socket.path().display()
                            ));
                            return None;
                        }
                        continue;
                    }
                    ready = listener.readable() => match ready {
                        Ok(ready) => ready,
                        Err(error) => {
                            end(format!("waiting for connections failed: {error}"));
                            return None;
                        }
                    },
                };
                let shut_down = ready.ready().is_read_closed();
                match ready.try_io(|listener| listener.get_ref().accept()) {
                    Ok(Ok((stream, _))) => match accepted(stream) {
                        Ok(connection) => return Some((Ok(connection), Some((listener, socket)))),
                        Err(error) => tracing::warn!(server, %error, "an accepted connection could not be used"),
                    },
                    Ok(Err(error)) if transient(&error) => {
                        pause = (pause * 2).clamp(FIRST_PAUSE, LONGEST_PAUSE);
                        tracing::warn!(server, %error, ?pause, "accepting a connection failed; trying again");
                        tokio::time::sleep(pause).await;
                    }
                    Ok(Err(error)) => {
                        end(format!("accepting connections failed: {error}"));
                        return None;
                    }
                    Err(_would_block) if shut_down => {
                        end("its listening socket was shut down".to_owned());
                        return None;
                    }
                    Err(_would_block) => {}
                }
            }
        }
    }))
}

/// A connection accept gave, made non-blocking for tokio.
fn accepted(stream: std::os::unix::net::UnixStream) -> io::Result<LocalAuthority> {
    stream.set_nonblocking(true)?;
    Ok(LocalAuthority::new(UnixStream::from_std(stream)?))
}

/// Failures of accept that pass: the process or the system out of descriptors, buffers or memory,
/// a connection that went away before it was taken, a signal (what Go's net/http retries).
fn transient(error: &io::Error) -> bool {
    let passing = [
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOBUFS,
        Errno::NOMEM,
        Errno::CONNABORTED,
        Errno::INTR,
        Errno::AGAIN,
        Errno::PROTO,
    ];
    error
        .raw_os_error()
        .is_some_and(|code| passing.iter().any(|errno| errno.raw_os_error() == code))
}

/// Keeps [`SERVING_GATE`] open while `stopped` says nothing, closed once it names a stopped
/// server (the servers are not started again: the kubelet's probe and the log say why).
pub async fn follow_serving(mut stopped: watch::Receiver<Option<String>>, readiness: Readiness) {
    loop {
        let serving = stopped.borrow_and_update().is_none();
        readiness.set(SERVING_GATE, serving);
        if stopped.changed().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_descriptors_is_waited_out_and_a_closed_socket_is_not() {
        assert!(transient(&io::Error::from_raw_os_error(Errno::MFILE.raw_os_error())));
        assert!(transient(&io::Error::from_raw_os_error(
            Errno::CONNABORTED.raw_os_error()
        )));
        assert!(!transient(&io::Error::from_raw_os_error(Errno::INVAL.raw_os_error())));
        assert!(!transient(&io::Error::from_raw_os_error(Errno::BADF.raw_os_error())));
    }
}
