//! gpu-handler: reads the config, wires logging, probes, shutdown and the NVIDIA backend, and runs
//! the node's three loops: the PhysicalGPU status loop, the ResourceSlice publisher and the kubelet
//! DRA plugin (registration and prepare/unprepare).
//!
//! Environment: `NODE_NAME` (required), `NVML_LIBRARY` (default `libnvidia-ml.so.1`),
//! `ADDITIONAL_XIDS_TO_IGNORE` (comma-separated), `NVML_RESYNC_INTERVAL` (default `60s`, `0` off),
//! `HEALTH_ADDR` (probes and `/metrics`, default `0.0.0.0:8080`; the chart binds loopback and serves it
//! through kube-rbac-proxy), `LOG_LEVEL`, and those of [`node_plugin_config`].

mod node_plugin_config;
mod registration_status;

use std::sync::Arc;

use claim_preparation::{ClaimMetrics, NodeClaims, NodeClaimsLinks};
use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use gpu_vendor::VendorBackend;
use hardware_status::config::HandlerConfig;
use hardware_status::handler::{self, HandlerLinks};
use hardware_status::vendor_link::BackendLoader;
use kubelet_plugin::{DRIVER_NAME, PluginServer};
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig, XidPolicy};
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
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    init_logging()?;
    let config = HandlerConfig::from_env()?;
    let plugin = NodePluginConfig::from_lookup(|key| std::env::var(key).ok())?;
    let hook = plugin.install_cdi_hook()?;
    tracing::info!(node = %config.node_name, nvml = %config.nvml_library.display(), resync = ?config.nvml_resync, ?plugin, "starting gpu-handler");
    let backend_config = NvidiaBackendConfig {
        library_path: Some(config.nvml_library.clone()),
        xid_policy: XidPolicy::default().ignoring(config.additional_xids_to_ignore.iter().copied()),
    };
    let loader: BackendLoader = Arc::new(move || {
        NvidiaBackend::load(backend_config.clone()).map(|backend| Arc::new(backend) as Arc<dyn VendorBackend>)
    });
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    readiness.register(REGISTERED_GATE);
    // The metrics name themselves `gpu_handler_*`: a registry prefix would double it.
    let mut registry = Registry::default();
    let metrics = PublicationMetrics::register(&mut registry);
    let claim_metrics = ClaimMetrics::register(&mut registry);
    let registration_metric = RegistrationMetric::register(&mut registry);
    HealthServer::start_with_metrics(
        config.health_addr,
        readiness.clone(),
        Some(Arc::new(registry)),
        shutdown.clone(),
    )
    .await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));

    let links = HandlerLinks::new();
    let (catalog_sender, catalog) = watch::channel(Default::default());
    let claims = Arc::new(NodeClaims::new(
        client.clone(),
        DRIVER_NAME,
        plugin.prepare(&config.node_name, hook, std::env::current_exe().ok()),
        NodeClaimsLinks {
            catalog,
            backend: links.backend.subscribe(),
            after_change: links.trigger.clone(),
        },
        claim_metrics,
    ));
    tokio::spawn({
        let claims = claims.clone();
        async move { claims.reconcile_when_ready().await }
    });
    let server = PluginServer::start(plugin.plugin(), claims, shutdown.clone()).await?;
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
    let publishing = tokio::spawn(slice_publication::run(
        client.clone(),
        publisher,
        links.offers.subscribe(),
        catalog_sender,
        metrics,
        shutdown.clone(),
    ));
    let status = handler::run(config, client, loader, shutdown.clone(), readiness, links).await;
    shutdown.trigger();
    server.stopped().await;
    publishing.await??;
    status
}
