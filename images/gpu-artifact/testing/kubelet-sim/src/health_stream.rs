//! The kubelet's side of the DRA health service (`dra_plugin_manager.go`, `HandleWatchResourcesStream`):
//! once a plugin is registered it opens `NodeWatchResources` in the version the release picks, feeds
//! every report into the health cache and wakes the Pod workers when something changed; a stream
//! that ends clears the driver's health and is opened again after 5 s. A 1.37 kubelet stops for a
//! plugin that answers Unimplemented.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Channel;

use crate::health_cache::{DEFAULT_HEALTH_TIMEOUT, DeviceHealthStatus, HealthCache, ReportedDevice};
use crate::versions::{HealthVersion, HealthWatch};

/// The kubelet retries a health stream every 5 s (`wait.UntilWithContext(..., 5*time.Second)`).
const RETRY: Duration = Duration::from_secs(5);

/// Health shared by the registry (which starts streams) and the Pod workers (which read it).
pub(crate) struct HealthHub {
    pub watch: HealthWatch,
    pub cache: Mutex<HealthCache>,
    /// Bumped whenever a device's health or message changed.
    pub changed: watch::Sender<u64>,
    streams: Mutex<BTreeMap<String, JoinHandle<()>>>,
}

impl HealthHub {
    pub(crate) fn new(watch: HealthWatch) -> Self {
        Self {
            watch,
            cache: Mutex::default(),
            changed: watch::Sender::new(0),
            streams: Mutex::default(),
        }
    }

    /// (Re)starts `driver`'s stream in `version` over `channel`.
    pub(crate) fn start(self: &std::sync::Arc<Self>, driver: &str, version: HealthVersion, channel: Channel) {
        let hub = std::sync::Arc::clone(self);
        let task = tokio::spawn(hub.follow(driver.to_owned(), version, channel));
        if let Some(old) = self.streams.lock().unwrap().insert(driver.to_owned(), task) {
            old.abort();
        }
    }

    /// The plugin is gone: its stream stops and its health is forgotten.
    pub(crate) fn stop(&self, driver: &str) {
        if let Some(task) = self.streams.lock().unwrap().remove(driver) {
            task.abort();
        }
        self.forget(driver);
    }

    fn forget(&self, driver: &str) {
        if self.cache.lock().unwrap().clear_driver(driver) {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    async fn follow(self: std::sync::Arc<Self>, driver: String, version: HealthVersion, channel: Channel) {
        loop {
            let outcome = self.stream_once(&driver, version, channel.clone()).await;
            tracing::info!(%driver, ?version, ?outcome, "health stream ended");
            self.forget(&driver);
            let unimplemented = matches!(&outcome, Err(status) if status.code() == tonic::Code::Unimplemented);
            if unimplemented && matches!(self.watch, HealthWatch::Negotiated(_)) {
                return;
            }
            tokio::time::sleep(RETRY).await;
        }
    }

    async fn stream_once(&self, driver: &str, version: HealthVersion, channel: Channel) -> Result<(), tonic::Status> {
        macro_rules! stream {
            ($api:ident) => {{
                use kubelet_plugin_api::$api as api;
                let mut client = api::dra_resource_health_client::DraResourceHealthClient::new(channel);
                let mut stream = client
                    .node_watch_resources(api::NodeWatchResourcesRequest {})
                    .await?
                    .into_inner();
                while let Some(response) = stream.message().await? {
                    let devices = response
                        .devices
                        .into_iter()
                        .map(|d| {
                            let id = d.device.unwrap_or_default();
                            ReportedDevice {
                                pool: id.pool_name,
                                device: id.device_name,
                                health: match api::HealthStatus::try_from(d.health) {
                                    Ok(api::HealthStatus::Healthy) => DeviceHealthStatus::Healthy,
                                    Ok(api::HealthStatus::Unhealthy) => DeviceHealthStatus::Unhealthy,
                                    _ => DeviceHealthStatus::Unknown,
                                },
                                message: d.message,
                                timeout: u64::try_from(d.health_check_timeout_seconds)
                                    .ok()
                                    .filter(|s| *s > 0)
                                    .map_or(DEFAULT_HEALTH_TIMEOUT, Duration::from_secs),
                            }
                        })
                        .collect();
                    self.report(driver, devices);
                }
                Ok(())
            }};
        }
        match version {
            HealthVersion::V1 => stream!(dra_health_v1),
            HealthVersion::V1beta1 => stream!(dra_health_v1beta1),
            HealthVersion::V1alpha1 => stream!(dra_health_v1alpha1),
        }
    }

    fn report(&self, driver: &str, devices: Vec<ReportedDevice>) {
        if self.cache.lock().unwrap().update(driver, devices, Instant::now()) {
            self.changed.send_modify(|n| *n += 1);
        }
    }
}
