//! gpu-handler: reads the config, wires logging, probes, shutdown and the NVIDIA backend, and runs
//! the node's three loops: the PhysicalGPU status loop, the ResourceSlice publisher and the kubelet
//! DRA plugin (registration and prepare/unprepare).
//!
//! Environment: `NODE_NAME` (required), `NVML_LIBRARY` (default `libnvidia-ml.so.1`), the health
//! policy (`XID_APPLICATION`, `XID_IGNORED`, `XID_CRITICAL`, `XID_RECOVERABLE`,
//! `HEALTH_QUIET_PERIOD`, `HEALTH_NO_EXECUTE`), `NVML_RESYNC_INTERVAL` (default `60s`, `0` off),
//! `HEALTH_ADDR` (probes and `/metrics`, default `0.0.0.0:8080`; the chart binds loopback and serves it
//! through kube-rbac-proxy), `LOG_LEVEL`, and those of [`node_plugin_config`].

mod health_feed;
mod node_plugin_config;
mod registration_status;

use std::sync::Arc;

use claim_preparation::{ClaimMetrics, NodeClaims, NodeClaimsLinks};
use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use gpu_vendor::VendorBackend;
use hardware_status::config::HandlerConfig;
use hardware_status::handler::{self, HandlerLinks};
use hardware_status::health_metrics::HealthMetrics;
use hardware_status::health_tracker::HealthFiles;
use hardware_status::vendor_link::BackendLoader;
use kubelet_plugin::{DRIVER_NAME, PluginServer, SERVING_GATE, follow_serving};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig};
use prometheus_client::registry::Registry;
use slice_publication::{PublicationMetrics, PublisherConfig};
use tokio::sync::watch;

use crate::node_plugin_config::NodePluginConfig;
use crate::registration_status::{REGISTERED_GATE, RegistrationMetric, follow_registration};

fn main() -> anyhow::Result<()> {
    // `gpu-handler mps-namespace <shm dir> -- <command>`: the launcher of MPS daemons (single-threaded).
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == node_prepare::MPS_NAMESPACE_COMMAND) {
        let (Some(shm), Some(command)) = (args.get(1), args.get(3..)) else {
            anyhow::bail!("usage: gpu-handler mps-namespace <shm dir> -- <command>...");
        };
        return Err(node_prepare::exec_in_mps_namespace(std::path::Path::new(shm), command).into());
    }
    component_base::block_on(run())?
}

async fn run() -> anyhow::Result<()> {
    init_logging()?;
    let mut config = HandlerConfig::from_env()?;
    let plugin = NodePluginConfig::from_lookup(|key| std::env::var(key).ok())?;
    let hook = plugin.install_cdi_hook()?;
    let prepare = plugin.prepare(&config.node_name, hook, std::env::current_exe().ok());
    // The health ledger lives beside the checkpoint, so it survives a restart of the handler.
    config.health_files = Some(HealthFiles {
        state: prepare.plugin_dir.join("health.json"),
        boot_id: prepare.boot_id_path(),
    });
    tracing::info!(node = %config.node_name, nvml = %config.nvml_library.display(), resync = ?config.nvml_resync, health = ?config.health_policy, ?plugin, "starting gpu-handler");
    let backend_config = NvidiaBackendConfig {
        library_path: Some(config.nvml_library.clone()),
    };
    let loader: BackendLoader = Arc::new(move || {
        NvidiaBackend::load(backend_config.clone()).map(|backend| Arc::new(backend) as Arc<dyn VendorBackend>)
    });
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    readiness.register(REGISTERED_GATE);
    readiness.register(SERVING_GATE);
    // The metrics name themselves `gpu_handler_*`: a registry prefix would double it.
    let mut registry = Registry::default();
    let metrics = PublicationMetrics::register(&mut registry);
    let (claim_metrics, node_pods) = ClaimMetrics::register(&mut registry);
    let registration_metric = RegistrationMetric::register(&mut registry);
    let health_metrics = HealthMetrics::register(&mut registry);
    HealthServer::start_with_metrics(
        config.health_addr,
        readiness.clone(),
        Some(Arc::new(registry)),
        shutdown.clone(),
    )
    .await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));
    tokio::spawn(node_pods.follow(client.clone(), config.node_name.clone(), shutdown.clone()));

    let links = HandlerLinks {
        health_metrics,
        ..HandlerLinks::new()
    };
    let (catalog_sender, catalog) = watch::channel(Default::default());
    let (all_devices_sender, all_devices) = watch::channel(Default::default());
    let (health_sender, health_feed) = watch::channel(Vec::new());
    tokio::spawn(health_feed::follow(
        dra_offers::pool_name(&config.node_name),
        all_devices,
        links.card_health.subscribe(),
        health_sender,
    ));
    let (holdings_sender, holdings) = watch::channel(Default::default());
    let claims = Arc::new(NodeClaims::new(
        client.clone(),
        DRIVER_NAME,
        prepare,
        NodeClaimsLinks {
            catalog,
            backend: links.backend.subscribe(),
            after_change: links.trigger.clone(),
            holdings: holdings_sender,
        },
        claim_metrics,
    ));
    tokio::spawn({
        let claims = claims.clone();
        async move { claims.reconcile_when_ready().await }
    });
    tokio::spawn({
        let claims = claims.clone();
        async move { claims.keep_up(plugin.mps_supervise_interval).await }
    });
    let server = PluginServer::start_with_health(plugin.plugin(), claims, Some(health_feed), shutdown.clone()).await?;
    // A server that stops (its listener failed) leaves the node unable to prepare: not ready.
    tokio::spawn(follow_serving(server.stopped_serving(), readiness.clone()));
    tokio::spawn(follow_registration(
        server.registered(),
        readiness.clone(),
        registration_metric,
    ));
    let publisher = PublisherConfig {
        node_name: config.node_name.clone(),
        driver_name: DRIVER_NAME.to_owned(),
        field_manager: hardware_status::FIELD_MANAGER.to_owned(),
        mig_offers: plugin.mig_offers,
    };
    let publishing = tokio::spawn(slice_publication::run_with_holdings(
        client.clone(),
        publisher,
        links.offers.subscribe(),
        holdings,
        slice_publication::PublishedSenders {
            catalog: catalog_sender,
            all_devices: all_devices_sender,
        },
        metrics,
        shutdown.clone(),
    ));
    let status = handler::run(config, client, loader, shutdown.clone(), readiness, links).await;
    shutdown.trigger();
    server.stopped().await;
    publishing.await??;
    status
}
