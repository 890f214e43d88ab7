//! Graceful shutdown: one token every task of a component watches, fired by SIGTERM or SIGINT.

use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

/// A cloneable shutdown token; firing it asks every holder to finish and stop.
#[derive(Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }
}

/// Waits for SIGTERM (what the kubelet sends) or SIGINT, then fires `shutdown` and returns the
/// signal's name for the log line.
pub async fn wait_for_termination(shutdown: Shutdown) -> std::io::Result<&'static str> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = shutdown.cancelled() => "shutdown requested",
    };
    tracing::info!(signal = name, "shutting down");
    shutdown.trigger();
    Ok(name)
}
