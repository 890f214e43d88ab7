//! gpu-handler: reads the config, wires logging, probes, shutdown and the NVIDIA backend, runs the
//! status loop.
//!
//! Environment: `NODE_NAME` (required), `NVML_LIBRARY` (default `libnvidia-ml.so.1`),
//! `ADDITIONAL_XIDS_TO_IGNORE` (comma-separated), `NVML_RESYNC_INTERVAL` (default `60s`, `0` off),
//! `HEALTH_ADDR` (default `0.0.0.0:8080`), `LOG_LEVEL`.

use std::sync::Arc;

use component_base::{HealthServer, Readiness, Shutdown, init_logging, wait_for_termination};
use gpu_vendor::VendorBackend;
use hardware_status::config::HandlerConfig;
use hardware_status::handler;
use hardware_status::vendor_link::BackendLoader;
use nvidia_backend::{NvidiaBackend, NvidiaBackendConfig, XidPolicy};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_logging()?;
    let config = HandlerConfig::from_env()?;
    tracing::info!(node = %config.node_name, nvml = %config.nvml_library.display(), resync = ?config.nvml_resync, "starting gpu-handler");
    let backend_config = NvidiaBackendConfig {
        library_path: Some(config.nvml_library.clone()),
        xid_policy: XidPolicy::default().ignoring(config.additional_xids_to_ignore.iter().copied()),
    };
    let loader: BackendLoader = Arc::new(move || {
        NvidiaBackend::load(backend_config.clone()).map(|backend| Arc::new(backend) as Arc<dyn VendorBackend>)
    });
    let shutdown = Shutdown::new();
    let readiness = Readiness::default();
    HealthServer::start(config.health_addr, readiness.clone(), shutdown.clone()).await?;
    let client = kube::Client::try_default().await?;
    tokio::spawn(wait_for_termination(shutdown.clone()));
    handler::run(config, client, loader, shutdown, readiness).await
}
