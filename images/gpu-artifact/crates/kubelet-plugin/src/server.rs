//! Starting and stopping the plugin: the DRA socket first (the kubelet dials the endpoint right
//! after registration), then the registration socket; both served until shutdown, then removed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use component_base::Shutdown;
use futures::TryStreamExt;
use kubelet_plugin_api::registration::registration_server::RegistrationServer;
use kubelet_plugin_api::{dra_health_v1, dra_health_v1alpha1, dra_health_v1beta1, dra_v1, dra_v1beta1};
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::Server;
use tonic::transport::server::Router;

use crate::config::PluginConfig;
use crate::dra_service::DraService;
use crate::health_service::{HealthFeed, HealthService};
use crate::preparer::ClaimPreparer;
use crate::registration::RegistrationService;
use crate::socket::{BoundSocket, SocketError};
use crate::uds_authority::LocalAuthority;

/// The running plugin: both sockets served until the shutdown token fires.
pub struct PluginServer {
    dra_socket: PathBuf,
    registration_socket: PathBuf,
    registered: watch::Receiver<bool>,
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
        let dra_server = serve("DRA", dra_router, dra_listener, dra_bound, shutdown.clone());

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
            registration_listener,
            registration_bound,
            shutdown,
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
    listener: UnixListener,
    socket: BoundSocket,
    shutdown: Shutdown,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        // The kubelet's plugin watcher sends an authority h2 refuses (see uds_authority).
        let incoming = UnixListenerStream::new(listener).map_ok(LocalAuthority::new);
        if let Err(error) = router
            .serve_with_incoming_shutdown(incoming, async move { shutdown.cancelled().await })
            .await
        {
            tracing::error!(server = what, %error, "kubelet plugin server failed");
        }
        socket.remove();
    })
}
