use std::sync::Arc;
use std::time::Duration;

use axum::routing::post;
use component_base::Shutdown;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::*;

/// A server whose only route echoes the request body, and a client that trusts it.
struct Served {
    addr: std::net::SocketAddr,
    connector: TlsConnector,
    _shutdown: Shutdown,
}

async fn served(limits: ConnectionLimits) -> Served {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let cert = CertificateDer::from(certified.cert.der().to_vec());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/", post(|body: String| async move { body }));
    let shutdown = Shutdown::new();
    let acceptor = TlsAcceptor::from(Arc::new(server));
    tokio::spawn(serve(listener, acceptor, app, limits, shutdown.clone()));
    Served {
        addr,
        connector: TlsConnector::from(Arc::new(client)),
        _shutdown: shutdown,
    }
}

impl Served {
    async fn tls(&self) -> std::io::Result<TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(self.addr).await?;
        let name = ServerName::try_from("localhost").unwrap();
        self.connector.connect(name, tcp).await
    }
}

/// Everything the server sends until it closes the connection. A guard far above the deadlines
/// under test turns a server that never closes into a failure instead of a hang.
async fn until_closed(stream: &mut (impl AsyncReadExt + Unpin), what: &str) -> String {
    let mut received = vec![];
    let read = stream.read_to_end(&mut received);
    match tokio::time::timeout(Duration::from_secs(60), read).await {
        Ok(_) => String::from_utf8_lossy(&received).into_owned(),
        Err(_) => panic!("the server kept open {what}"),
    }
}

const SHORT: ConnectionLimits = ConnectionLimits {
    max: 8,
    handshake: Duration::from_millis(200),
    request: Duration::from_millis(200),
};

#[tokio::test]
async fn a_connection_that_never_starts_its_handshake_is_cut() {
    let served = served(SHORT).await;
    let mut silent = TcpStream::connect(served.addr).await.unwrap();
    until_closed(&mut silent, "a connection that sent no TLS hello").await;
}

#[tokio::test]
async fn a_connection_that_never_sends_its_request_is_cut() {
    let served = served(SHORT).await;
    let mut slow_loris = served.tls().await.unwrap();
    until_closed(&mut slow_loris, "a TLS connection that sent no request").await;
}

#[tokio::test]
async fn a_request_whose_body_never_arrives_is_answered_408() {
    let served = served(SHORT).await;
    let mut stream = served.tls().await.unwrap();
    let head = "POST / HTTP/1.1\r\nhost: localhost\r\ncontent-length: 100\r\n\r\n{";
    stream.write_all(head.as_bytes()).await.unwrap();
    let answer = until_closed(&mut stream, "a request whose body never came").await;
    assert!(answer.starts_with("HTTP/1.1 408"), "answer: {answer}");
}

#[tokio::test]
async fn connections_past_the_limit_are_refused_and_served_again_once_one_ends() {
    let served = served(ConnectionLimits {
        max: 2,
        handshake: Duration::from_secs(300),
        request: Duration::from_secs(300),
    })
    .await;
    let first = served.tls().await.unwrap();
    let _second = served.tls().await.unwrap();
    let refused = served.tls().await;
    assert!(refused.is_err(), "a third connection is refused while two are open");
    drop(first);
    // The server frees the first one's place once it reads its end: try until it has.
    let answer = loop {
        if let Ok(mut stream) = served.tls().await {
            let request = "POST / HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
            stream.write_all(request.as_bytes()).await.unwrap();
            break until_closed(&mut stream, "a served request with connection: close").await;
        }
        tokio::task::yield_now().await;
    };
    assert!(
        answer.starts_with("HTTP/1.1 200") && answer.ends_with("ok"),
        "answer: {answer}"
    );
}
