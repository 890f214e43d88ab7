//! What lets the real kubelet talk to our sockets. The kubelet dials a plugin's registration socket
//! with grpc-go and the socket's path as the target, so every request carries `:authority:
//! %2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2F...` (grpc-go percent-encodes the path). The HTTP/2
//! server under tonic (h2) refuses a `%` in the host as a malformed authority and resets the stream
//! (PROTOCOL_ERROR), so the kubelet never gets GetInfo and the plugin never registers
//! (kubernetes/kubernetes#112597 fixed this for device plugins and CSI with
//! `WithAuthority("localhost")`, not for the plugin watcher). On a Unix socket the authority means
//! nothing; each connection's inbound header blocks get `localhost` before h2 reads them.

mod frames;
mod hpack;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tonic::transport::server::{Connected, UdsConnectInfo};

use frames::InboundRewriter;

/// A connection accepted on one of our Unix sockets, its inbound HTTP/2 header blocks rewritten.
pub struct LocalAuthority {
    inner: UnixStream,
    rewriter: InboundRewriter,
    /// Rewritten bytes the server has not read yet.
    ready: Vec<u8>,
    closed: bool,
}

impl LocalAuthority {
    pub fn new(inner: UnixStream) -> Self {
        LocalAuthority {
            inner,
            rewriter: InboundRewriter::default(),
            ready: Vec::new(),
            closed: false,
        }
    }
}

impl AsyncRead for LocalAuthority {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        while this.ready.is_empty() && !this.closed {
            let mut chunk = [0u8; 8192];
            let mut read = ReadBuf::new(&mut chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    this.closed = true;
                    this.ready = this.rewriter.finish();
                }
                Poll::Ready(Ok(())) => this.ready = this.rewriter.push(read.filled()),
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let n = this.ready.len().min(buf.remaining());
        buf.put_slice(this.ready.get(..n).unwrap_or_default());
        this.ready.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for LocalAuthority {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

impl Connected for LocalAuthority {
    type ConnectInfo = UdsConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests;
