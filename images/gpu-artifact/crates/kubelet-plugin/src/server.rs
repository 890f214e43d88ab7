//! Starting and stopping the plugin: the DRA socket first (the kubelet dials the endpoint right
//! after registration), then the registration socket; both served until shutdown, then removed. A
//! server that stops before shutdown says why ([`PluginServer::stopped_serving`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use component_base::Shutdown;
use kubelet_plugin_api::registration::registration_server::RegistrationServer;
use kubelet_plugin_api::{dra_health_v1, dra_health_v1alpha1, dra_health_v1beta1, dra_v1, dra_v1beta1};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tonic::transport::Server;
use tonic::transport::server::Router;

use crate::config::PluginConfig;
use crate::dra_service::DraService;
use crate::health_service::{HealthFeed, HealthService};
use crate::preparer::ClaimPreparer;
use crate::registration::RegistrationService;
use crate::serving::{StopReport, connections};
use crate::socket::{BoundSocket, SocketError};

/// The running plugin: both sockets served until the shutdown token fires.
pub struct PluginServer {
    dra_socket: PathBuf,
    registration_socket: PathBuf,
    registered: watch::Receiver<bool>,
    stopped: watch::Receiver<Option<String>>,
    servers: Vec<JoinHandle<()>>,
}

impl PluginServer {
    /// Binds and serves `<root>/plugins/<driver>/dra.sock` (DRA v1 and v1beta1), then
    /// `<root>/plugins_registry/<driver>-reg.sock`. Fails if either socket is served by another live
    /// process or cannot be created.
    pub async fn start<P: ClaimPreparer>(
        config: PluginConfig,
        preparer: Arc<P>,
        shutdown: Shutdown,
    ) -> Result<Self, SocketError> {
        Self::start_with_health(config, preparer, None, shutdown).await
    }

    /// [`Self::start`], also serving the DRA health service (v1alpha1, v1beta1, v1) on the DRA
    /// socket from `health` and advertising it at registration.
    pub async fn start_with_health<P: ClaimPreparer>(
        config: PluginConfig,
        preparer: Arc<P>,
        health: Option<HealthFeed>,
        shutdown: Shutdown,
    ) -> Result<Self, SocketError> {
        let dra_socket = config.dra_socket();
        let registration_socket = config.registration_socket();

        // The DRA socket listens before the registration socket exists: the kubelet dials the
        // endpoint as soon as it has registered us.
        let (dra_listener, dra_bound) = BoundSocket::bind(&dra_socket).await?;
        let (registration_listener, registration_bound) = match BoundSocket::bind(&registration_socket).await {
            Ok(bound) => bound,
            Err(error) => {
                // Without registration the kubelet never calls the DRA socket: do not leave it behind.
                drop(dra_listener);
                dra_bound.remove();
                return Err(error);
            }
        };

        let service = DraService::new(preparer);
        let health_service = health.map(|feed| HealthService::new(feed, shutdown.clone()));
        let dra_router = Server::builder()
            .add_service(dra_v1::dra_plugin_server::DraPluginServer::new(service.clone()))
            .add_service(dra_v1beta1::dra_plugin_server::DraPluginServer::new(service))
            .add_optional_service(
                health_service
                    .clone()
                    .map(dra_health_v1::dra_resource_health_server::DraResourceHealthServer::new),
            )
            .add_optional_service(
                health_service
                    .clone()
                    .map(dra_health_v1beta1::dra_resource_health_server::DraResourceHealthServer::new),
            )
            .add_optional_service(
                health_service
                    .clone()
                    .map(dra_health_v1alpha1::dra_resource_health_server::DraResourceHealthServer::new),
            );
        let (report, stopped) = StopReport::new();
        let dra_server = serve(
            "DRA",
            dra_router,
            (dra_listener, dra_bound),
            shutdown.clone(),
            report.clone(),
        );

        let (registered_tx, registered) = watch::channel(false);
        let registration = RegistrationService::new(
            &config.driver_name,
            &dra_socket.to_string_lossy(),
            health_service.is_some(),
            registered_tx,
        );
        let registration_router = Server::builder().add_service(RegistrationServer::new(registration));
        let registration_server = serve(
            "registration",
            registration_router,
            (registration_listener, registration_bound),
            shutdown,
            report,
        );
        tracing::info!(
            driver = %config.driver_name,
            dra_socket = %dra_socket.display(),
            registration_socket = %registration_socket.display(),
            "kubelet plugin serving"
        );
        Ok(Self {
            dra_socket,
            registration_socket,
            registered,
            stopped,
            servers: vec![dra_server, registration_server],
        })
    }

    pub fn dra_socket(&self) -> &Path {
        &self.dra_socket
    }

    pub fn registration_socket(&self) -> &Path {
        &self.registration_socket
    }

    /// Whether the kubelet's last NotifyRegistrationStatus accepted the plugin (false until it
    /// calls; false again if a later registration is rejected). For readiness.
    pub fn registered(&self) -> watch::Receiver<bool> {
        self.registered.clone()
    }

    /// Why a server stopped before shutdown (`None` while both serve): its listener failed or was
    /// closed. For readiness ([`crate::follow_serving`]); the log says it too.
    pub fn stopped_serving(&self) -> watch::Receiver<Option<String>> {
        self.stopped.clone()
    }

    /// Waits until both servers have stopped after shutdown and their socket files are removed.
    pub async fn stopped(self) {
        for server in self.servers {
            let _ = server.await;
        }
    }
}

fn serve(
    what: &'static str,
    router: Router,
    (listener, socket): (std::os::unix::net::UnixListener, BoundSocket),
    shutdown: Shutdown,
    report: StopReport,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The kubelet's plugin watcher sends an authority h2 refuses (see uds_authority).
        match connections(listener, socket.clone(), what, report.clone()) {
            Ok(incoming) => {
                let served = router
                    .serve_with_incoming_shutdown(incoming, {
                        let shutdown = shutdown.clone();
                        async move { shutdown.cancelled().await }
                    })
                    .await;
                if let Err(error) = served
                    && !shutdown.is_triggered()
                {
                    report.stopped(what, &error.to_string());
                }
            }
            Err(error) => report.stopped(what, &format!("its listener cannot be watched: {error}")),
        }
        socket.remove();
    })
}
