//! Where uevent payloads come from: the kernel's netlink socket on a node,
//! or an injector in tests. Both go through the same parsing and PCI
//! filtering, so a test exercises the code the node runs.

use std::io;
use std::pin::Pin;

use futures::channel::mpsc;
use futures::{Stream, StreamExt, future};
use netlink_sys::protocols::NETLINK_KOBJECT_UEVENT;
use netlink_sys::{AsyncSocket, AsyncSocketExt, SocketAddr, TokioSocket};

use super::message::{UEvent, UEventError, parse};

/// The kernel's multicast group for uevents (udevd uses group 2 for its own re-broadcasts).
const KERNEL_UEVENT_GROUP: u32 = 1;

/// A large receive buffer so a burst (a card with many functions, a bus
/// rescan) does not overflow it; the kernel caps it at net.core.rmem_max.
const RECEIVE_BUFFER_BYTES: usize = 4 << 20;

/// Linux's errno for "No buffer space available", which a netlink socket
/// returns once after the kernel had to drop messages for it.
const ENOBUFS: i32 = 105;

/// Why an item of the stream is not an event.
#[derive(Debug, thiserror::Error)]
pub enum UEventSourceError {
    /// The socket failed. `ENOBUFS` means events were dropped because the
    /// reader fell behind: the caller should rescan everything.
    #[error("receiving uevents: {0}")]
    Receive(#[from] io::Error),
    #[error(transparent)]
    Parse(#[from] UEventError),
}

/// PCI uevents, from whichever source.
pub type PciUEvents = Pin<Box<dyn Stream<Item = Result<UEvent, UEventSourceError>> + Send>>;

/// Parses payloads and keeps PCI events: libudev messages and other
/// subsystems are dropped, malformed payloads and receive errors come
/// through as errors and the stream goes on.
pub fn pci_events<S>(payloads: S) -> PciUEvents
where
    S: Stream<Item = io::Result<Vec<u8>>> + Send + 'static,
{
    Box::pin(payloads.filter_map(|payload| {
        let item = match payload {
            Err(error) => Some(Err(UEventSourceError::Receive(error))),
            Ok(bytes) => match parse(&bytes) {
                Ok(Some(event)) if event.is_pci() => Some(Ok(event)),
                Ok(_) => None,
                Err(error) => Some(Err(UEventSourceError::Parse(error))),
            },
        };
        future::ready(item)
    }))
}

/// A netlink socket bound to the kernel's uevent group.
///
/// uevents are per network namespace: in a pod it sees the node's events only
/// with `hostNetwork: true`. Receiving needs no privilege.
pub struct KernelUEventSocket {
    socket: TokioSocket,
}

impl KernelUEventSocket {
    /// Opens and binds the socket. Must be called inside a Tokio runtime.
    pub fn open() -> io::Result<Self> {
        let mut socket = TokioSocket::new(NETLINK_KOBJECT_UEVENT)?;
        socket.socket_mut().bind(&SocketAddr::new(0, KERNEL_UEVENT_GROUP))?;
        // Best effort: a smaller buffer still works, only bursts overflow sooner.
        let _ = socket.socket_ref().set_rx_buf_sz(RECEIVE_BUFFER_BYTES);
        Ok(Self { socket })
    }

    /// The raw datagrams sent by the kernel. Datagrams from user space (any
    /// sender port but 0) are dropped: a process must not be able to fake a
    /// hotplug. `ENOBUFS` (events lost to an overflow) is yielded and
    /// receiving goes on; any other error is yielded and ends the stream,
    /// since a broken socket would only fail again: the caller reopens.
    pub fn payloads(self) -> impl Stream<Item = io::Result<Vec<u8>>> + Send + 'static {
        futures::stream::unfold(Some(self.socket), |socket| async move {
            let socket = socket?;
            match socket.recv_from_full().await {
                Ok(received) => Some((Ok(received), Some(socket))),
                Err(error) if error.raw_os_error() == Some(ENOBUFS) => Some((Err(error), Some(socket))),
                Err(error) => Some((Err(error), None)),
            }
        })
        .filter_map(|received| {
            future::ready(match received {
                Ok((bytes, sender)) if sender.port_number() == 0 => Some(Ok(bytes)),
                Ok(_) => None,
                Err(error) => Some(Err(error)),
            })
        })
    }
}

/// PCI uevents from the kernel: [`KernelUEventSocket`] through [`pci_events`].
pub fn listen() -> io::Result<PciUEvents> {
    Ok(pci_events(KernelUEventSocket::open()?.payloads()))
}

/// Feeds payloads into an injected source, e.g. the ones
/// `host_fixtures::HostTree` returns for a hotplug.
#[derive(Clone)]
pub struct UEventInjector {
    sender: mpsc::UnboundedSender<io::Result<Vec<u8>>>,
}

impl UEventInjector {
    /// Sends one payload; false once the stream has been dropped.
    pub fn send(&self, payload: impl Into<Vec<u8>>) -> bool {
        self.sender.unbounded_send(Ok(payload.into())).is_ok()
    }

    /// Sends a receive error, as the socket reports `ENOBUFS` after an overflow.
    pub fn send_error(&self, error: io::Error) -> bool {
        self.sender.unbounded_send(Err(error)).is_ok()
    }
}

/// A source fed by tests: what the injector sends goes through [`pci_events`].
/// The stream ends when every injector is dropped.
pub fn injected() -> (UEventInjector, PciUEvents) {
    let (sender, receiver) = mpsc::unbounded();
    (UEventInjector { sender }, pci_events(receiver))
}
