//! The simulator itself: plugin discovery, the watch of the node's Pods, one worker per Pod, and
//! what tests read back.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::claim_cache::ClaimCache;
use crate::dra_client::ClaimId;
use crate::health_stream::HealthHub;
use crate::observations::{CallCounts, Observations};
use crate::plugin_registry::{PluginRegistration, PluginRegistry};
use crate::versions::HealthWatch;
use crate::{DraVersion, pod_worker};

/// The kubelet's timing, shortened only where a test needs it.
#[derive(Debug, Clone)]
pub struct KubeletSimOptions {
    /// The DRA services this kubelet supports, e.g. only `V1beta1` to act as a 1.33 kubelet.
    pub supported_versions: Vec<DraVersion>,
    /// Per NodePrepareResources / NodeUnprepareResources call (the kubelet's 45 s).
    pub call_timeout: Duration,
    /// First retry delay after a failed call; doubles up to `backoff_max`.
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    /// How often the plugin registry directory and not-yet-ready claims are looked at.
    pub poll_interval: Duration,
    /// Whether and in which version the kubelet streams device health (`ResourceHealthStatus`).
    pub health: HealthWatch,
    /// Whether `allocatedResourcesStatus` carries the plugin's message (`ResourceHealthStatusMessage`,
    /// beta and on from 1.36; the 1.34 API has no such field).
    pub health_messages: bool,
    /// How often a running Pod's status is written again without a health change (the kubelet's
    /// status sync), which turns a device Unknown when its reports stopped.
    pub status_sync: Duration,
}

impl Default for KubeletSimOptions {
    fn default() -> Self {
        Self {
            supported_versions: DraVersion::all(),
            call_timeout: Duration::from_secs(45),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(16),
            poll_interval: Duration::from_millis(150),
            health: HealthWatch::kubelet_1_37(),
            health_messages: true,
            status_sync: Duration::from_secs(10),
        }
    }
}

impl KubeletSimOptions {
    /// The defaults of a kubelet of the API server's release `minor`: 1.34 with the
    /// `ResourceHealthStatus` gate on (as the test bed runs it) streams v1alpha1 and writes no
    /// message; 1.37 negotiates v1 and writes messages.
    pub fn for_release(minor: u32) -> Self {
        let (health, health_messages) = if minor >= 37 {
            (HealthWatch::kubelet_1_37(), true)
        } else {
            (HealthWatch::Always(crate::HealthVersion::V1alpha1), minor >= 36)
        };
        Self {
            health,
            health_messages,
            ..Self::default()
        }
    }
}

/// State every task of one simulator shares.
pub(crate) struct SimShared {
    pub client: Client,
    pub options: KubeletSimOptions,
    pub plugins: Arc<PluginRegistry>,
    /// Held across gRPC calls: prepare and unprepare never overlap, as in the kubelet.
    pub cache: tokio::sync::Mutex<ClaimCache>,
    pub observed: Mutex<Observations>,
    pub recorder: Recorder,
    pub health: Arc<HealthHub>,
}

impl SimShared {
    pub(crate) fn count_calls(&self, claims: &[ClaimId], count: impl Fn(&mut CallCounts)) {
        let mut observed = self.observed.lock().unwrap();
        for claim in claims {
            count(observed.calls.entry(claim.to_string()).or_default());
        }
    }
}

/// A simulated kubelet for one Node. Its tasks stop when it is stopped or dropped.
pub struct KubeletSim {
    node_name: String,
    shared: Arc<SimShared>,
    tasks: Vec<JoinHandle<()>>,
}

impl KubeletSim {
    /// Starts watching `<kubelet_root>/plugins_registry/` for plugins and the Pods bound to
    /// `node_name`. The Node object itself is not created here (the test bed's `ReadyNode` does that).
    pub fn start(
        client: Client,
        node_name: impl Into<String>,
        kubelet_root: impl Into<PathBuf>,
        options: KubeletSimOptions,
    ) -> Self {
        let node_name = node_name.into();
        let registry_dir = kubelet_root.into().join("plugins_registry");
        let reporter = Reporter {
            controller: "kubelet".into(),
            instance: Some(node_name.clone()),
        };
        let health = Arc::new(HealthHub::new(options.health.clone()));
        let shared = Arc::new(SimShared {
            client: client.clone(),
            options: options.clone(),
            plugins: Arc::new(PluginRegistry::new(Arc::clone(&health))),
            health,
            cache: tokio::sync::Mutex::new(ClaimCache::default()),
            observed: Mutex::new(Observations::default()),
            recorder: Recorder::new(client, reporter),
        });
        let discovery = tokio::spawn(Arc::clone(&shared.plugins).watch(
            registry_dir,
            options.supported_versions,
            options.poll_interval,
        ));
        let pods = tokio::spawn(watch_pods(Arc::clone(&shared), node_name.clone()));
        Self {
            node_name,
            shared,
            tasks: vec![discovery, pods],
        }
    }

    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// Plugins seen in the registry, by driver name (including rejected ones, with their error).
    pub fn plugins(&self) -> BTreeMap<String, PluginRegistration> {
        self.shared.plugins.registrations()
    }

    /// Claim name -> CDI ids of a Pod whose claims are all prepared, while it runs on the node.
    pub fn prepared(&self, namespace: &str, pod: &str) -> Option<BTreeMap<String, Vec<String>>> {
        let key = format!("{namespace}/{pod}");
        self.shared.observed.lock().unwrap().prepared_pods.get(&key).cloned()
    }

    /// Calls made so far, by `<namespace>/<claim name>`.
    pub fn calls(&self) -> BTreeMap<String, CallCounts> {
        self.shared.observed.lock().unwrap().calls.clone()
    }

    /// Calls made so far for one claim.
    pub fn calls_for(&self, namespace: &str, claim: &str) -> CallCounts {
        self.calls()
            .get(&format!("{namespace}/{claim}"))
            .copied()
            .unwrap_or_default()
    }

    /// Stops every task (discovery, the Pod watch, the Pod workers) and waits for them to end.
    pub async fn stop(mut self) {
        for task in std::mem::take(&mut self.tasks) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for KubeletSim {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Feeds each Pod's versions to its worker; the worker set is dropped (aborting them) with this task.
async fn watch_pods(shared: Arc<SimShared>, node_name: String) {
    let api = Api::<Pod>::all(shared.client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={node_name}"));
    let mut events = watcher::watcher(api, config)
        .backoff(controller_plumbing::WatchBackoff::default())
        .boxed();
    let mut workers = JoinSet::new();
    let mut pods: HashMap<String, watch::Sender<Option<Pod>>> = HashMap::new();
    let mut relisted: Vec<String> = Vec::new();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(node = %node_name, %error, "pod watch failed; retrying");
                continue;
            }
        };
        match event {
            Event::Apply(pod) | Event::InitApply(pod) => {
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                relisted.push(uid.clone());
                match pods.get(&uid) {
                    Some(updates) => {
                        updates.send_replace(Some(pod));
                    }
                    None => {
                        let (updates, receiver) = watch::channel(Some(pod));
                        pods.insert(uid, updates);
                        workers.spawn(pod_worker::run(Arc::clone(&shared), receiver));
                    }
                }
            }
            Event::Delete(pod) => {
                if let Some(updates) = pods.remove(pod.metadata.uid.as_deref().unwrap_or_default()) {
                    updates.send_replace(None);
                }
            }
            Event::Init => relisted.clear(),
            // Pods missing from a relist were deleted while the watch was down.
            Event::InitDone => pods.retain(|uid, updates| {
                let present = relisted.contains(uid);
                if !present {
                    updates.send_replace(None);
                }
                present
            }),
        }
        while workers.try_join_next().is_some() {}
    }
}
