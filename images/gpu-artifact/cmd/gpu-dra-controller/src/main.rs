//! gpu-dra-controller: reads the config, wires logging, probes, metrics, shutdown and leader
//! election, runs the allocation controller.
//!
//! Environment: `POD_NAMESPACE` and `POD_NAME` (the Lease and this replica's identity),
//! `LEADER_ELECTION` (default `true`), `HEALTH_ADDR` (probes and `/metrics`, default
//! `127.0.0.1:8080`, reached through kube-rbac-proxy), `LOG_LEVEL`, `WEBHOOK_CERT_DIR` (a
//! directory with `tls.crt` and `tls.key`: when set, every replica serves the admission webhook
//! that gates GPU Pods for best fit) and `WEBHOOK_ADDR` (default `0.0.0.0:9443`).
//! `PREEMPTION` (`Disabled` turns priority preemption for gated Pods off; see
//! `claim_allocation::preemption`).
//!
//! Its heap is jemalloc's (see `heap`).

mod heap;

use std::sync::Arc;

use allocation_gate::webhook::{self, WebhookConfig};
use claim_allocation::controller;
use claim_allocation::metrics::Metrics;
use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use controller_plumbing::LeaderElection;
use prometheus_client::registry::Registry;

fn env(key: &str, default: &str) -> String {
    std::env::var(key)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_owned())
}

fn main() -> anyhow::Result<()> {
    component_base::block_on(run())?
}

async fn run() -> anyhow::Result<()> {
    init_logging()?;
    let identity = env("POD_NAME", &std::process::id().to_string());
    tracing::info!(%identity, "starting gpu-dra-controller");
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let addr = env("HEALTH_ADDR", "127.0.0.1:8080").parse()?;
    HealthServer::start_with_metrics(addr, readiness.clone(), Some(Arc::new(registry)), shutdown.clone()).await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));
    let cert_dir = env("WEBHOOK_CERT_DIR", "");
    if !cert_dir.is_empty() {
        let config = WebhookConfig {
            addr: env("WEBHOOK_ADDR", "0.0.0.0:9443").parse()?,
            cert_file: std::path::Path::new(&cert_dir).join("tls.crt"),
            key_file: std::path::Path::new(&cert_dir).join("tls.key"),
            limits: webhook::ConnectionLimits::default(),
        };
        webhook::start(client.clone(), config, shutdown.clone()).await?;
    }
    let election = LeaderElection::from_env(client.clone(), "gpu-dra-controller", &identity).await?;
    controller::run(client, metrics, election, readiness, shutdown).await
}
