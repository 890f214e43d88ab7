//! The HTTPS server under the admission webhook, made to hold when clients misbehave or crowd it:
//! a TLS handshake and a request each have a deadline, and at most [`ConnectionLimits::max`]
//! connections are served at once. A connection past the limit is closed at once rather than
//! queued: the API server then admits the Pod ungated (failurePolicy Ignore), where a queue would
//! make it wait out its 3 s timeout anyway, and memory and tasks stay bounded whatever arrives.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use component_base::Shutdown;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// How much one client may take of the webhook.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Connections served at once; the API server keeps a few alive and reuses them.
    pub max: usize,
    /// From accept to the end of the TLS handshake.
    pub handshake: Duration,
    /// For a request's head, from when the connection waits for it (so an idle kept-alive
    /// connection is closed after as long), and again for its body.
    pub request: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        // The API server gives the webhook 3 s a call (timeoutSeconds); a client slower than this
        // has given up already.
        Self {
            max: 128,
            handshake: Duration::from_secs(5),
            request: Duration::from_secs(10),
        }
    }
}

/// Accepts TLS connections on `listener` and serves `app` on each, within `limits`, until
/// `shutdown` fires.
pub async fn serve(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    app: Router,
    limits: ConnectionLimits,
    shutdown: Shutdown,
) {
    let permits = Arc::new(Semaphore::new(limits.max));
    let app = app.layer(axum::middleware::from_fn_with_state(limits.request, within_deadline));
    loop {
        let (stream, peer) = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "admission webhook accept failed");
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = limits.max, "admission webhook refused a connection: too many open");
            drop(stream);
            continue;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let stream = match tokio::time::timeout(limits.handshake, acceptor.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => return tracing::debug!(%peer, %error, "admission TLS handshake failed"),
                Err(_) => return tracing::debug!(%peer, "admission TLS handshake took too long"),
            };
            // HTTP/1 only (no ALPN offers h2): hyper's HTTP/1 server times the wait for each
            // request head itself, where the auto-detecting server reads the first bytes untimed.
            let served = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.request)
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app))
                .await;
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "admission connection ended");
            }
        });
    }
}

/// Answers 408 when a request (its body, then its handling) takes longer than `deadline`: the
/// head's deadline is hyper's, a body that trickles in or never comes is cut here.
async fn within_deadline(State(deadline): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(deadline, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::REQUEST_TIMEOUT, "the request took too long").into_response(),
    }
}

#[cfg(test)]
#[path = "webhook_server_tests.rs"]
mod tests;
