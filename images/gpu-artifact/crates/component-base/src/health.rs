//! `/healthz` (the process serves requests), `/readyz` (every registered part is ready) and, for
//! components with metrics, `/metrics` in the Prometheus text format.
//!
//! Readiness is a set of named gates: a component registers one per thing it needs (a synced
//! informer cache, a registered kubelet plugin) and the probe answers 503 naming what is missing.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::Shutdown;

/// Named readiness gates, shared between the parts of a component and its probe endpoint.
#[derive(Clone, Default)]
pub struct Readiness {
    gates: Arc<Mutex<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// Registers a gate that starts not ready.
    pub fn register(&self, gate: &str) {
        self.lock().entry(gate.to_owned()).or_insert(false);
    }

    pub fn set(&self, gate: &str, ready: bool) {
        self.lock().insert(gate.to_owned(), ready);
    }

    /// Names of the gates that are not ready, in order; empty means ready.
    pub fn pending(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, ready)| !**ready)
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, bool>> {
        // A panic while holding this lock cannot leave the map half-written: every write is one insert.
        self.gates.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The probe endpoint of a component.
pub struct HealthServer {
    local_addr: SocketAddr,
}

impl HealthServer {
    /// Binds `addr` and serves the probes until `shutdown` fires.
    pub async fn start(addr: SocketAddr, readiness: Readiness, shutdown: Shutdown) -> std::io::Result<Self> {
        Self::start_with_metrics(addr, readiness, None, shutdown).await
    }

    /// Like [`Self::start`], plus `/metrics` from `registry`. In a cluster only the kube-rbac-proxy
    /// sidecar reaches this port: bind it to 127.0.0.1 there.
    pub async fn start_with_metrics(
        addr: SocketAddr,
        readiness: Readiness,
        registry: Option<Arc<Registry>>,
        shutdown: Shutdown,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let mut app = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(readyz))
            .with_state(readiness);
        if let Some(registry) = registry {
            app = app.route("/metrics", get(move || metrics(registry.clone())));
        }
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.cancelled().await })
                .await;
            if let Err(error) = served {
                tracing::error!(%error, "health endpoint stopped");
            }
        });
        Ok(Self { local_addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }
}

/// The OpenMetrics text of `registry`, exactly as `/metrics` serves it.
pub fn metrics_text(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut body = String::new();
    prometheus_client::encoding::text::encode(&mut body, registry)?;
    Ok(body)
}

async fn metrics(registry: Arc<Registry>) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    match metrics_text(&registry) {
        Ok(body) => (
            StatusCode::OK,
            [(
                "content-type",
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        ),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [("content-type", "text/plain")],
            error.to_string(),
        ),
    }
}

async fn readyz(State(readiness): State<Readiness>) -> (StatusCode, String) {
    let pending = readiness.pending();
    if pending.is_empty() {
        (StatusCode::OK, "ok".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}", pending.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let response = reqwest::get(format!("http://{addr}{path}"))
            .await
            .expect("probe answers");
        (response.status().as_u16(), response.text().await.expect("body"))
    }

    #[tokio::test]
    async fn metrics_are_served_in_the_prometheus_format() {
        let mut registry = Registry::default();
        let counter = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("gpu_test_events", "Events seen by the test", counter.clone());
        counter.inc_by(3);
        let shutdown = Shutdown::new();
        let server = HealthServer::start_with_metrics(
            "127.0.0.1:0".parse().unwrap(),
            Readiness::default(),
            Some(Arc::new(registry)),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let (code, body) = get(server.local_addr(), "/metrics").await;
        assert_eq!(code, 200);
        assert!(body.contains("gpu_test_events_total 3"), "{body}");
        shutdown.trigger();
    }

    #[tokio::test]
    async fn readyz_names_pending_gates_until_all_are_ready() {
        let readiness = Readiness::default();
        readiness.register("informers-synced");
        readiness.register("plugin-registered");
        let shutdown = Shutdown::new();
        let server = HealthServer::start("127.0.0.1:0".parse().unwrap(), readiness.clone(), shutdown.clone())
            .await
            .unwrap();
        let addr = server.local_addr();

        assert_eq!(get(addr, "/healthz").await, (200, "ok".to_owned()));
        assert_eq!(
            get(addr, "/readyz").await,
            (503, "not ready: informers-synced, plugin-registered".to_owned())
        );
        readiness.set("informers-synced", true);
        assert_eq!(
            get(addr, "/readyz").await,
            (503, "not ready: plugin-registered".to_owned())
        );
        readiness.set("plugin-registered", true);
        assert_eq!(get(addr, "/readyz").await, (200, "ok".to_owned()));

        assert_eq!(
            get(addr, "/metrics").await.0,
            404,
            "no metrics route without a registry"
        );

        shutdown.trigger();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(
            reqwest::get(format!("http://{addr}/healthz")).await.is_err(),
            "server stops on shutdown"
        );
    }
}
