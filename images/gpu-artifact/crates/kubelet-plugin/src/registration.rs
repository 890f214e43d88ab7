//! The registration service the kubelet's plugin watcher calls: it tells the kubelet who we are
//! and where the DRA services are, and learns whether the kubelet accepted us.

use kubelet_plugin_api::registration::registration_server::Registration;
use kubelet_plugin_api::registration::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// The plugin type the kubelet expects from a DRA driver.
pub const DRA_PLUGIN_TYPE: &str = "DRAPlugin";

/// The DRA services we serve, in our order of preference: the kubelet takes the first it supports.
pub const SUPPORTED_VERSIONS: [&str; 2] = ["v1.DRAPlugin", "v1beta1.DRAPlugin"];

/// The health services we serve when a health feed is given, newest first: a 1.37 kubelet takes
/// the newest it knows (v1), a 1.36 one v1alpha1; 1.34-1.35 kubelets call v1alpha1 whatever we list.
/// They follow the DRA entries, which the kubelet matches in our order.
pub const HEALTH_SERVICES: [&str; 3] = [
    "v1.DRAResourceHealth",
    "v1beta1.DRAResourceHealth",
    "v1alpha1.DRAResourceHealth",
];

pub(crate) struct RegistrationService {
    info: PluginInfo,
    registered: watch::Sender<bool>,
}

impl RegistrationService {
    pub(crate) fn new(driver_name: &str, dra_endpoint: &str, health: bool, registered: watch::Sender<bool>) -> Self {
        let health_services: &[&str] = if health { &HEALTH_SERVICES } else { &[] };
        Self {
            info: PluginInfo {
                r#type: DRA_PLUGIN_TYPE.to_owned(),
                name: driver_name.to_owned(),
                endpoint: dra_endpoint.to_owned(),
                supported_versions: SUPPORTED_VERSIONS
                    .iter()
                    .chain(health_services)
                    .map(|s| s.to_string())
                    .collect(),
            },
            registered,
        }
    }
}

#[tonic::async_trait]
impl Registration for RegistrationService {
    async fn get_info(&self, _request: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        tracing::info!(driver = %self.info.name, endpoint = %self.info.endpoint, "kubelet asked for plugin info");
        Ok(Response::new(self.info.clone()))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(driver = %self.info.name, "kubelet registered the plugin");
        } else {
            tracing::error!(
                driver = %self.info.name,
                kubelet_error = %status.error,
                "kubelet rejected the plugin registration"
            );
        }
        self.registered.send_replace(status.plugin_registered);
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}
