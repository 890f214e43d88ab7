//! gpu-node-agent: reads the config, wires logging, probes and shutdown, runs the inventory sync.

use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use inventory_sync::agent;
use inventory_sync::config::AgentConfig;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging()?;
    let config = AgentConfig::from_env()?;
    tracing::info!(node = %config.node_name, root = %config.host_root.display(), uevents = ?config.uevents, "starting gpu-node-agent");
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    HealthServer::start(config.health_addr, readiness.clone(), shutdown.clone()).await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));
    agent::run(config, client, shutdown, readiness).await
}
