//! gpu-controller: reads the config, wires logging, probes, metrics, shutdown and leader election,
//! runs the DriverReady controller and the GPUClass controller (while leading, under one Lease)
//! and the inventory and class metrics (on every replica).
//!
//! Environment: `VALIDATOR_NAMESPACE` (default `d8-gpu`), `VALIDATOR_SELECTOR` (default
//! `app=gpu-driver-validator`), `GPUCLASS_SELECTOR` (a label selector limiting the GPUClasses
//! reconciled, default every one; for tests that share a cluster), `POD_NAMESPACE` and `POD_NAME`
//! (the Lease and this replica's identity), `LEADER_ELECTION` (default `true`), `HEALTH_ADDR`
//! (probes and `/metrics`, default `0.0.0.0:8080`; the chart binds loopback behind kube-rbac-proxy),
//! `ALLOCATION_GATE_TIMEOUT` (seconds a Pod may wait behind the allocation gate before it is
//! lifted, default 30; `0` turns the lifter off).

use std::sync::Arc;

use allocation_gate::gate_lifter::{self, DEFAULT_LIFT_AFTER};
use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use controller_plumbing::{EventPublisher, LeaderElection, while_leading};
use driver_readiness::controller::ValidatorSelector;
use driver_readiness::inventory_metrics;
use gpu_class_controller::{GpuClassControllerConfig, class_metrics};
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
    let selector = ValidatorSelector {
        namespace: env("VALIDATOR_NAMESPACE", "d8-gpu"),
        labels: env("VALIDATOR_SELECTOR", "app=gpu-driver-validator"),
    };
    let identity = env("POD_NAME", &std::process::id().to_string());
    let classes = GpuClassControllerConfig {
        class_selector: env("GPUCLASS_SELECTOR", ""),
        instance: Some(identity.clone()),
    };
    tracing::info!(?selector, ?classes, %identity, "starting gpu-controller");
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    let mut registry = Registry::default();
    let inventory = inventory_metrics::register(&mut registry);
    let class_cache = class_metrics::register(&mut registry);
    HealthServer::start_with_metrics(
        env("HEALTH_ADDR", "0.0.0.0:8080").parse()?,
        readiness,
        Some(Arc::new(registry)),
        shutdown.clone(),
    )
    .await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));
    tokio::spawn(inventory_metrics::keep_inventory(
        client.clone(),
        inventory,
        shutdown.clone(),
    ));
    tokio::spawn(class_metrics::keep_classes(
        client.clone(),
        class_cache,
        shutdown.clone(),
    ));
    let election = LeaderElection::from_env(client.clone(), "gpu-controller", &identity).await?;
    let lift_after = match std::env::var("ALLOCATION_GATE_TIMEOUT").ok().filter(|v| !v.is_empty()) {
        Some(seconds) => std::time::Duration::from_secs(seconds.parse()?),
        None => DEFAULT_LIFT_AFTER,
    };
    if !lift_after.is_zero() {
        let events = EventPublisher::new(client.clone(), "gpu-controller", Some(identity.clone()));
        let (client, shutdown_lifter) = (client.clone(), shutdown.clone());
        tokio::spawn(while_leading(
            election.clone(),
            shutdown.clone(),
            "allocation gate lifter",
            move || gate_lifter::run(client.clone(), lift_after, events.clone(), shutdown_lifter.clone()),
        ));
    }
    tokio::join!(
        driver_readiness::controller::run(client.clone(), selector, election.clone(), shutdown.clone()),
        gpu_class_controller::run(client, classes, election, shutdown),
    );
    Ok(())
}
