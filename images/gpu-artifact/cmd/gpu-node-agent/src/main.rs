//! gpu-node-agent: reads the config, wires logging, probes, metrics and shutdown, runs the inventory
//! sync. `HEALTH_ADDR` serves the probes and `/metrics` (the chart binds the host's loopback and
//! serves `/metrics` through kube-rbac-proxy).

use std::sync::Arc;

use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use inventory_sync::agent;
use inventory_sync::config::AgentConfig;
use inventory_sync::metrics::AgentMetrics;
use prometheus_client::registry::Registry;

fn main() -> anyhow::Result<()> {
    component_base::block_on(run())?
}

async fn run() -> anyhow::Result<()> {
    init_logging()?;
    let config = AgentConfig::from_env()?;
    tracing::info!(node = %config.node_name, root = %config.host_root.display(), uevents = ?config.uevents, "starting gpu-node-agent");
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    let mut registry = Registry::default();
    let metrics = AgentMetrics::register(&mut registry);
    HealthServer::start_with_metrics(
        config.health_addr,
        readiness.clone(),
        Some(Arc::new(registry)),
        shutdown.clone(),
    )
    .await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));
    agent::run(config, client, shutdown, readiness, metrics).await
}
