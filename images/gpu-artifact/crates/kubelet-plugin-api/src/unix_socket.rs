//! Dialling a gRPC service on a Unix socket, the only transport the kubelet uses for plugins.

use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

/// A channel to the gRPC server listening on `socket`. Connects now, so an error means nothing
/// accepts connections there.
pub async fn connect_unix_socket(socket: &Path) -> Result<Channel, tonic::transport::Error> {
    let socket: PathBuf = socket.to_owned();
    // The URI is required by tonic but never resolved: every connection goes through the connector.
    Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
}
