//! The kubelet's DRA health service (`DRAResourceHealth/NodeWatchResources`, KEP-4680) in its three
//! versions: each stream gets the full list of the node's devices at once, again on every change,
//! and again every [`HEARTBEAT`] so the kubelet, which shows a device Unknown when it has heard
//! nothing for its timeout (30 s by default, [`HEALTH_TIMEOUT_SECONDS`] as we ask), keeps it known.
//!
//! What each device's health is comes from the feed; this module only serves it.

use std::pin::Pin;
use std::time::Duration;

use component_base::Shutdown;
use futures::Stream;
use kubelet_plugin_api::{dra_health_v1 as v1, dra_health_v1alpha1 as v1alpha1, dra_health_v1beta1 as v1beta1};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

/// How often the full list is sent again without a change.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// The timeout we ask the kubelet to apply (v1beta1 and v1; v1alpha1 kubelets use their default,
/// the same 30 s): three heartbeats.
pub const HEALTH_TIMEOUT_SECONDS: i64 = 30;
/// The kubelet keeps at most this many characters of a message.
const MESSAGE_MAX: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportedHealth {
    Healthy,
    Unhealthy,
    Unknown,
}

/// One device's health as the kubelet is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceHealthReport {
    pub pool_name: String,
    pub device_name: String,
    pub health: ReportedHealth,
    pub message: String,
}

/// The current list of every device of the driver on the node.
pub type HealthFeed = watch::Receiver<Vec<DeviceHealthReport>>;

#[derive(Clone)]
pub(crate) struct HealthService {
    feed: HealthFeed,
    /// Ends every open stream, so that the server's graceful stop does not wait for the kubelet
    /// to hang up (it never does by itself).
    shutdown: Shutdown,
}

impl HealthService {
    pub(crate) fn new(feed: HealthFeed, shutdown: Shutdown) -> Self {
        Self { feed, shutdown }
    }

    /// A stream of `convert(list)` on connect, on every change and every heartbeat, ending when the
    /// kubelet goes away, the feed closes or the plugin shuts down.
    fn stream<M: Send + 'static>(
        &self,
        convert: fn(&[DeviceHealthReport], i64) -> M,
    ) -> Pin<Box<dyn Stream<Item = Result<M, Status>> + Send>> {
        let (sender, receiver) = mpsc::channel(2);
        let mut feed = self.feed.clone();
        let shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            loop {
                let reports = feed.borrow_and_update().clone();
                tokio::select! {
                    sent = sender.send(Ok(convert(&reports, unix_now()))) => if sent.is_err() { return },
                    _ = shutdown.cancelled() => return,
                }
                tokio::select! {
                    changed = feed.changed() => if changed.is_err() { return },
                    _ = tokio::time::sleep(HEARTBEAT) => {}
                    _ = sender.closed() => return,
                    _ = shutdown.cancelled() => return,
                }
            }
        });
        Box::pin(ReceiverStream::new(receiver))
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// The message cut the way the kubelet would (1021 characters and `...`), on a character boundary.
fn bounded(message: &str) -> String {
    if message.len() <= MESSAGE_MAX {
        return message.to_owned();
    }
    let mut end = MESSAGE_MAX - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}

/// The three generated servers have the same shape over distinct types: one implementation,
/// expanded for `$api` (the generated module).
macro_rules! serve_health_api {
    ($api:ident, $convert:ident) => {
        fn $convert(reports: &[DeviceHealthReport], now: i64) -> $api::NodeWatchResourcesResponse {
            let devices = reports
                .iter()
                .map(|report| $api::DeviceHealth {
                    device: Some($api::DeviceIdentifier {
                        pool_name: report.pool_name.clone(),
                        device_name: report.device_name.clone(),
                    }),
                    health: match report.health {
                        ReportedHealth::Healthy => $api::HealthStatus::Healthy,
                        ReportedHealth::Unhealthy => $api::HealthStatus::Unhealthy,
                        ReportedHealth::Unknown => $api::HealthStatus::Unknown,
                    } as i32,
                    last_updated_time: now,
                    health_check_timeout_seconds: HEALTH_TIMEOUT_SECONDS,
                    message: bounded(&report.message),
                })
                .collect();
            $api::NodeWatchResourcesResponse { devices }
        }

        #[tonic::async_trait]
        impl $api::dra_resource_health_server::DraResourceHealth for HealthService {
            type NodeWatchResourcesStream =
                Pin<Box<dyn Stream<Item = Result<$api::NodeWatchResourcesResponse, Status>> + Send>>;

            async fn node_watch_resources(
                &self,
                _request: Request<$api::NodeWatchResourcesRequest>,
            ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
                tracing::info!(api = stringify!($api), "kubelet opened a health stream");
                Ok(Response::new(self.stream($convert)))
            }
        }
    };
}

serve_health_api!(v1alpha1, to_v1alpha1);
serve_health_api!(v1beta1, to_v1beta1);
serve_health_api!(v1, to_v1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_like_the_kubelet_cuts_them() {
        let long = "é".repeat(600);
        let cut = bounded(&long);
        assert!(cut.len() <= MESSAGE_MAX && cut.ends_with("..."), "{}", cut.len());
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn reports_carry_the_timeout_and_the_time() {
        let reports = [DeviceHealthReport {
            pool_name: "gpus/n".into(),
            device_name: "gpu0".into(),
            health: ReportedHealth::Unhealthy,
            message: "Xid 79".into(),
        }];
        let response = to_v1(&reports, 42);
        let device = &response.devices[0];
        assert_eq!(device.health, v1::HealthStatus::Unhealthy as i32);
        assert_eq!(
            (device.last_updated_time, device.health_check_timeout_seconds),
            (42, 30)
        );
        assert_eq!(to_v1alpha1(&reports, 42).devices[0].message, "Xid 79");
    }
}
