//! Loopback ports for the servers a test starts, held from the moment they are chosen.
//!
//! Choosing a port by binding port 0 and closing the socket leaves a window in which any other
//! process (a parallel test, a client's ephemeral port) can take it before the server binds it; a
//! cold CI run lost kube-apiserver that way. A [`ReservedPort`] keeps its socket bound, not
//! listening, with `SO_REUSEADDR`, for as long as it lives: the kernel then never hands the port to
//! anyone else, while the server we start (which sets `SO_REUSEADDR` on its listener, as Go's `net`
//! and tokio both do) can still bind it. `tools/testbed/hold-ports.py` does the same for the shell.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::Context;
use socket2::{Domain, Socket, Type};

/// A 127.0.0.1 port nobody else can take until this is dropped.
pub struct ReservedPort {
    _socket: Socket,
    port: u16,
}

impl ReservedPort {
    pub fn new() -> anyhow::Result<Self> {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, None).context("socket for a port")?;
        socket.set_reuse_address(true)?;
        socket
            .bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())
            .context("binding 127.0.0.1:0")?;
        let port = socket
            .local_addr()?
            .as_socket()
            .context("a bound IPv4 socket has an address")?
            .port();
        Ok(Self { _socket: socket, port })
    }

    pub fn number(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`, as the components' `*_ADDR` settings take it.
    pub fn loopback_addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserved_port_is_never_handed_out_again_but_its_server_can_bind_it() {
        let reserved = ReservedPort::new().unwrap();
        let others: Vec<ReservedPort> = (0..200).map(|_| ReservedPort::new().unwrap()).collect();
        assert!(
            others.iter().all(|o| o.number() != reserved.number()),
            "a port-0 bind never returns a held port"
        );
        // The server that was promised the port binds and listens on it (std sets SO_REUSEADDR).
        let listener =
            std::net::TcpListener::bind(("127.0.0.1", reserved.number())).expect("the server binds its reserved port");
        let client = std::net::TcpStream::connect(("127.0.0.1", reserved.number())).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        assert_eq!(accepted.peer_addr().unwrap(), client.local_addr().unwrap());
    }

    #[tokio::test]
    async fn tokio_listeners_bind_a_reserved_port() {
        let reserved = ReservedPort::new().unwrap();
        let listener = tokio::net::TcpListener::bind(reserved.loopback_addr()).await.unwrap();
        assert_eq!(listener.local_addr().unwrap().port(), reserved.number());
    }

    #[test]
    fn a_plain_listener_cannot_take_a_reserved_port() {
        let reserved = ReservedPort::new().unwrap();
        // A socket without SO_REUSEADDR (what a foreign process would usually open) is refused.
        let foreign = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        let refused = foreign.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, reserved.number())).into());
        assert_eq!(refused.unwrap_err().kind(), std::io::ErrorKind::AddrInUse);
    }
}
