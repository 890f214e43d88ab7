//! One simulated node for a test: a Ready Node in the real cluster, a slice of two GPUs and a
//! DeviceClass for it, the real kubelet plugin transport with a scripted preparer under a temporary
//! kubelet root, and the simulator watching both.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use component_base::Shutdown;
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{ListParams, PostParams};
use kubelet_plugin::{ClaimPreparer, ClaimRef, HealthFeed, PluginConfig, PluginServer, PreparedDevice};
use kubelet_sim::{KubeletSim, KubeletSimOptions};
use serde_json::json;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

pub const DRIVER: &str = "gpu.deckhouse.io";

/// Prepares every claim into the CDI id `gpu.deckhouse.io/claim=<uid>`; the first `failures`
/// prepare calls fail with [`BUSY`].
#[derive(Default)]
pub struct ScriptedPreparer {
    pub failures: AtomicUsize,
    pub prepared: Mutex<Vec<ClaimRef>>,
    pub unprepared: Mutex<Vec<ClaimRef>>,
}

pub const BUSY: &str = "device gpu0 is busy (scripted failure)";

pub fn cdi_id(claim_uid: &str) -> String {
    format!("{DRIVER}/claim={claim_uid}")
}

impl ClaimPreparer for ScriptedPreparer {
    async fn prepare(&self, claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        self.prepared.lock().unwrap().push(claim.clone());
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(format!("claim {}/{}: {BUSY}", claim.namespace, claim.name));
        }
        Ok(vec![PreparedDevice {
            request_names: vec![],
            pool_name: "gpus".into(),
            device_name: "gpu0".into(),
            cdi_device_ids: vec![cdi_id(&claim.uid)],
            share_id: None,
        }])
    }

    async fn unprepare(&self, claim: ClaimRef) -> Result<(), String> {
        self.unprepared.lock().unwrap().push(claim);
        Ok(())
    }
}

pub struct SimNode {
    pub ns: TestNamespace,
    pub node: ReadyNode,
    pub root: tempfile::TempDir,
    pub preparer: Arc<ScriptedPreparer>,
    pub plugin: PluginServer,
    pub plugin_shutdown: Shutdown,
    pub sim: KubeletSim,
    /// Name of the DeviceClass that selects this node's GPUs.
    pub class: String,
    /// The extended resource name the class serves when started with `extended_resource`.
    pub resource_name: String,
}

/// Fast retries so a test sees several attempts within seconds.
pub fn fast_options() -> KubeletSimOptions {
    KubeletSimOptions {
        backoff_initial: Duration::from_millis(200),
        backoff_max: Duration::from_secs(1),
        ..KubeletSimOptions::default()
    }
}

impl SimNode {
    /// With `extended_resource`, the DeviceClass also serves the extended resource `gpu.deckhouse.io/<namespace>`.
    pub async fn start(test: &str, options: KubeletSimOptions, extended_resource: bool) -> Self {
        Self::start_with(test, options, extended_resource, None).await
    }

    /// [`Self::start`] with the plugin also serving device health from `health`.
    pub async fn start_with(
        test: &str,
        options: KubeletSimOptions,
        extended_resource: bool,
        health: Option<HealthFeed>,
    ) -> Self {
        let ns = TestNamespace::create(test).await.unwrap();
        let node = ReadyNode::register(&ns, "node", BTreeMap::new()).await.unwrap();
        let client = ns.client();
        let slice: ResourceSlice = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": ns.unique("gpus"), "labels": ns.owner_labels()},
            "spec": {
                "driver": DRIVER, "nodeName": node.name(),
                "pool": {"name": format!("gpus/{}", node.name()), "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu0"}, {"name": "gpu1"}],
            },
        }))
        .unwrap();
        Api::<ResourceSlice>::all(client.clone())
            .create(&PostParams::default(), &slice)
            .await
            .unwrap();
        let class_name = ns.unique("gpu");
        let mut class_spec = json!({"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]});
        let resource_name = format!("{DRIVER}/{}", ns.name());
        if extended_resource {
            class_spec["extendedResourceName"] = json!(resource_name);
        }
        let class: DeviceClass = serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": class_name, "labels": ns.owner_labels()},
            "spec": class_spec,
        }))
        .unwrap();
        Api::<DeviceClass>::all(client.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();

        let root = tempfile::tempdir().unwrap();
        let preparer = Arc::new(ScriptedPreparer::default());
        let plugin_shutdown = Shutdown::new();
        let config = PluginConfig {
            kubelet_root: root.path().to_owned(),
            ..PluginConfig::default()
        };
        let plugin = PluginServer::start_with_health(config, Arc::clone(&preparer), health, plugin_shutdown.clone())
            .await
            .unwrap();
        let sim = KubeletSim::start(client, node.name(), root.path(), options);
        let mut registered = plugin.registered();
        tokio::time::timeout(Duration::from_secs(10), registered.wait_for(|r| *r))
            .await
            .expect("the simulator registers the plugin")
            .unwrap();
        Self {
            ns,
            node,
            root,
            preparer,
            plugin,
            plugin_shutdown,
            sim,
            class: class_name,
            resource_name,
        }
    }

    /// A Pod pinned to this node; `extra` is merged into its spec.
    pub fn pod(&self, name: &str, resources: serde_json::Value, extra: serde_json::Value) -> Pod {
        let mut spec = json!({
            "nodeSelector": {"kubernetes.io/hostname": self.node.name()},
            "containers": [{"name": "main", "image": "registry.invalid/testbed/pause:1", "resources": resources}],
        });
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}))
            .unwrap()
    }

    pub async fn create<K>(&self, object: &K) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        self.ns.api::<K>().create(&PostParams::default(), object).await.unwrap()
    }

    /// Waits until the Pod is Running with Ready=True, as the simulator reports it.
    pub async fn running(&self, name: &str) -> Pod {
        let pods = self.ns.api::<Pod>();
        wait_until(&format!("pod {name} to run"), Duration::from_secs(60), || async {
            let pod = pods.get(name).await?;
            let status = pod.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            Ok(if status.phase.as_deref() == Some("Running") && ready {
                Progress::Done(pod)
            } else {
                Progress::Pending(format!("phase {:?}, conditions {:?}", status.phase, status.conditions))
            })
        })
        .await
        .unwrap()
    }

    pub async fn gone(&self, name: &str) {
        let pods = self.ns.api::<Pod>();
        wait_until(
            &format!("pod {name} to be deleted"),
            Duration::from_secs(60),
            || async {
                Ok(match pods.get_opt(name).await? {
                    None => Progress::Done(()),
                    Some(pod) => Progress::Pending(format!("deletionTimestamp {:?}", pod.metadata.deletion_timestamp)),
                })
            },
        )
        .await
        .unwrap()
    }

    pub async fn claim(&self, name: &str) -> ResourceClaim {
        self.ns.api::<ResourceClaim>().get(name).await.unwrap()
    }

    /// The reference the kubelet sends for `claim`.
    pub fn claim_ref(claim: &ResourceClaim) -> ClaimRef {
        ClaimRef {
            namespace: claim.metadata.namespace.clone().unwrap(),
            name: claim.metadata.name.clone().unwrap(),
            uid: claim.metadata.uid.clone().unwrap(),
        }
    }

    /// Warning Events on a Pod with `reason`, as core/v1 Events (what `kubectl describe` shows).
    pub async fn pod_events(&self, pod: &str, reason: &str) -> Vec<Event> {
        let selector = format!("involvedObject.name={pod},reason={reason}");
        self.ns
            .api::<Event>()
            .list(&ListParams::default().fields(&selector))
            .await
            .unwrap()
            .items
    }
}
