//! Plugin discovery as the kubelet's plugin watcher does it: find `*-reg.sock` in
//! `<root>/plugins_registry/`, ask the plugin who it is, pick a DRA version, dial its endpoint,
//! and tell it the outcome. A socket file that is replaced (the plugin restarted) is registered again.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kubelet_plugin_api::connect_unix_socket;
use kubelet_plugin_api::registration::registration_client::RegistrationClient;
use kubelet_plugin_api::registration::{InfoRequest, PluginInfo, RegistrationStatus};

use crate::DraVersion;
use crate::dra_client::DraClient;
use crate::health_stream::HealthHub;
use crate::versions::{HealthVersion, choose_version};

/// The plugin type a DRA driver must register with.
const DRA_PLUGIN_TYPE: &str = "DRAPlugin";

/// What the simulated kubelet knows about one driver's plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginRegistration {
    pub driver: String,
    pub registration_socket: PathBuf,
    pub endpoint: String,
    /// The DRA service in use; None when the registration was rejected.
    pub version: Option<DraVersion>,
    /// The health service the kubelet streams from; None when it watches none for this plugin.
    pub health: Option<HealthVersion>,
    /// Why the registration was rejected (what the plugin was told).
    pub error: Option<String>,
    /// How many times this driver completed the handshake (a restarted plugin registers again).
    pub handshakes: usize,
}

/// Device, inode and change time of a socket file: a recreated socket (a restarted plugin) differs.
type SocketIdentity = (u64, u64, i64, i64);

pub(crate) struct PluginRegistry {
    registrations: Mutex<BTreeMap<String, PluginRegistration>>,
    clients: Mutex<BTreeMap<String, DraClient>>,
    health: Arc<HealthHub>,
}

impl PluginRegistry {
    pub(crate) fn new(health: Arc<HealthHub>) -> Self {
        Self {
            registrations: Mutex::default(),
            clients: Mutex::default(),
            health,
        }
    }

    pub(crate) fn registrations(&self) -> BTreeMap<String, PluginRegistration> {
        self.registrations.lock().unwrap().clone()
    }

    /// The DRA client of `driver`, or the error the kubelet reports for an unregistered driver.
    pub(crate) fn client(&self, driver: &str) -> Result<DraClient, String> {
        self.clients
            .lock()
            .unwrap()
            .get(driver)
            .cloned()
            .ok_or_else(|| format!("DRA driver {driver} is not registered"))
    }

    /// Watches `registry_dir` until the task is aborted.
    pub(crate) async fn watch(
        self: Arc<Self>,
        registry_dir: PathBuf,
        kubelet_versions: Vec<DraVersion>,
        poll: Duration,
    ) {
        // Socket path -> the file identity seen at its last handshake attempt that got an answer.
        let mut seen: BTreeMap<PathBuf, SocketIdentity> = BTreeMap::new();
        loop {
            let sockets = registration_sockets(&registry_dir);
            seen.retain(|path, _| sockets.contains_key(path));
            self.forget_plugins_without(&sockets);
            for (path, identity) in sockets {
                if seen.get(&path) == Some(&identity) {
                    continue;
                }
                match self.handshake(&path, &kubelet_versions).await {
                    Ok(()) => {
                        seen.insert(path, identity);
                    }
                    // Nobody answers yet (still starting, or left by a crash): look again next round.
                    Err(error) => tracing::debug!(socket = %path.display(), %error, "plugin did not answer GetInfo"),
                }
            }
            tokio::time::sleep(poll).await;
        }
    }

    /// GetInfo, validation, version choice, dialling the endpoint, recording the plugin, then
    /// NotifyRegistrationStatus (the kubelet registers its handler before it notifies). Err only
    /// when the registration socket does not answer at all.
    async fn handshake(&self, socket: &Path, kubelet_versions: &[DraVersion]) -> Result<(), String> {
        let channel = connect_unix_socket(socket).await.map_err(|e| error_chain(&e))?;
        let mut plugin = RegistrationClient::new(channel);
        let info = plugin
            .get_info(InfoRequest {})
            .await
            .map_err(|status| status.message().to_owned())?
            .into_inner();
        let outcome = validate(&info, kubelet_versions).await;
        let (version, client, error) = match outcome {
            Ok((version, client)) => (Some(version), Some(client), None),
            Err(error) => (None, None, Some(error)),
        };
        let health = client
            .as_ref()
            .and_then(|_| self.health.watch.choose(&info.supported_versions));
        let registration = PluginRegistration {
            driver: info.name.clone(),
            registration_socket: socket.to_owned(),
            endpoint: info.endpoint.clone(),
            version,
            health,
            error: error.clone(),
            handshakes: 0,
        };
        match (&client, health) {
            (Some(client), Some(health)) => self.health.start(&info.name, health, client.channel()),
            _ => self.health.stop(&info.name),
        }
        self.record(registration, client);
        let status = RegistrationStatus {
            plugin_registered: error.is_none(),
            error: error.clone().unwrap_or_default(),
        };
        if let Err(status) = plugin.notify_registration_status(status).await {
            tracing::warn!(socket = %socket.display(), error = %status.message(), "NotifyRegistrationStatus failed");
        }
        match &error {
            None => tracing::info!(driver = %info.name, endpoint = %info.endpoint, ?version, "plugin registered"),
            Some(error) => tracing::warn!(driver = %info.name, %error, "plugin registration rejected"),
        }
        Ok(())
    }

    fn record(&self, mut registration: PluginRegistration, client: Option<DraClient>) {
        let mut registrations = self.registrations.lock().unwrap();
        let mut clients = self.clients.lock().unwrap();
        let driver = registration.driver.clone();
        registration.handshakes = registrations.get(&driver).map_or(0, |r| r.handshakes) + 1;
        match client {
            Some(client) => {
                clients.insert(driver.clone(), client);
            }
            None => {
                clients.remove(&driver);
            }
        }
        registrations.insert(driver, registration);
    }

    /// A removed registration socket means the plugin is gone (the kubelet deregisters it).
    fn forget_plugins_without(&self, sockets: &BTreeMap<PathBuf, SocketIdentity>) {
        let registrations = self.registrations.lock().unwrap();
        let mut clients = self.clients.lock().unwrap();
        for registration in registrations.values() {
            if !sockets.contains_key(&registration.registration_socket)
                && clients.remove(&registration.driver).is_some()
            {
                self.health.stop(&registration.driver);
            }
        }
    }
}

/// `*-reg.sock` files with an identity that changes when the file is recreated.
fn registration_sockets(dir: &Path) -> BTreeMap<PathBuf, SocketIdentity> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with("-reg.sock"))
        .filter_map(|entry| {
            let metadata = entry.metadata().ok()?;
            let identity = (metadata.dev(), metadata.ino(), metadata.ctime(), metadata.ctime_nsec());
            Some((entry.path(), identity))
        })
        .collect()
}

async fn validate(info: &PluginInfo, kubelet_versions: &[DraVersion]) -> Result<(DraVersion, DraClient), String> {
    if info.r#type != DRA_PLUGIN_TYPE {
        return Err(format!(
            "plugin {} has type {:?}, expected {DRA_PLUGIN_TYPE:?}",
            info.name, info.r#type
        ));
    }
    let version = choose_version(&info.supported_versions, kubelet_versions).ok_or_else(|| {
        format!(
            "none of the versions {:?} of plugin {} is supported by the kubelet ({:?})",
            info.supported_versions,
            info.name,
            kubelet_versions
                .iter()
                .map(|v| v.registration_name())
                .collect::<Vec<_>>()
        )
    })?;
    let channel = connect_unix_socket(Path::new(&info.endpoint)).await.map_err(|error| {
        format!(
            "plugin {}: cannot dial endpoint {}: {}",
            info.name,
            info.endpoint,
            error_chain(&error)
        )
    })?;
    Ok((version, DraClient::new(version, channel)))
}

/// tonic's transport error says only "transport error"; the cause is in its sources.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
