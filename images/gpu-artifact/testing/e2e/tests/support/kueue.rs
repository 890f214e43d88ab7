//! Kueue's controller-manager, the real one (built from the Go module `sigs.k8s.io/kueue` by
//! `tools/testbed/build-kueue.sh`), run beside the module as the other actor that holds Pods with
//! its own scheduling gates: the plain-Pod integration, its webhooks served over TLS on loopback
//! (Pods of one test namespace only), and quotas on DRA devices through `deviceClassMappings`
//! (its alpha gate `DynamicResourceAllocation` on).
//!
//! With its own certificate management off, Kueue reads a metrics certificate from the fixed path
//! `/etc/kueue/metrics/certs` (cmd/kueue/main.go) even when it serves no metrics; it runs in a
//! mount namespace of its own whose `/etc` is an overlay holding that file, so nothing of the
//! machine's `/etc` changes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Api, Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use testbed::{ComponentProcess, Progress, TestNamespace, wait_until};

use super::allocation_webhook::loopback_certificate;
use super::components::{install_crds_from, repo_root, reserve_port, wait_ready};

/// Where `tools/testbed/build-kueue.sh` keeps Kueue: the binary, its CRDs and webhook manifests.
pub fn kueue_build() -> PathBuf {
    let out = Command::new(repo_root().join("tools/testbed/build-kueue.sh"))
        .output()
        .expect("tools/testbed/build-kueue.sh runs");
    assert!(
        out.status.success(),
        "building kueue: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A kind of Kueue's API, `kueue.x-k8s.io/v1beta2`.
fn kueue_kind(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind))
}

/// Kueue running for one test namespace.
pub struct Kueue {
    pub process: ComponentProcess,
    client: Client,
    webhooks: Vec<(bool, String)>,
}

/// Kueue's webhooks a test needs: its own kinds' and the plain Pods'. The other integrations'
/// (Jobs, Deployments, ...) would act on every namespace of the shared cluster.
fn wanted(path: &str) -> bool {
    path.contains("-kueue-x-k8s-io-") || path.ends_with("--v1-pod")
}

/// Kueue's webhook manifests, each pointed at `url`, the Pod webhooks limited to `ns`.
fn webhook_configs(build: &Path, ns: &TestNamespace, url: &str, ca_bundle: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(build.join("webhooks.yaml")).unwrap();
    let mut configs = vec![];
    for document in serde_yaml::Deserializer::from_str(&text) {
        let mut config = Value::deserialize(document).unwrap();
        let webhooks = config["webhooks"].as_array().cloned().unwrap_or_default();
        let kept: Vec<Value> = webhooks
            .into_iter()
            .filter_map(|mut webhook| {
                let path = webhook["clientConfig"]["service"]["path"].as_str()?.to_owned();
                if !wanted(&path) {
                    return None;
                }
                webhook["clientConfig"] = json!({"url": format!("{url}{path}"), "caBundle": ca_bundle});
                if path.ends_with("--v1-pod") {
                    webhook["namespaceSelector"] = json!({"matchLabels": {"kubernetes.io/metadata.name": ns.name()}});
                }
                Some(webhook)
            })
            .collect();
        let name = config["metadata"]["name"].as_str().unwrap_or("kueue").to_owned();
        config["metadata"] = json!({"name": ns.unique(&format!("kueue-{name}")), "labels": ns.owner_labels()});
        config["webhooks"] = json!(kept);
        configs.push(config);
    }
    configs
}

impl Kueue {
    /// Starts Kueue for the Pods of `ns` with its files in `dir`; `device_classes` maps each
    /// quota resource name to the DeviceClasses it counts (`deviceClassMappings`).
    pub async fn start(ns: &TestNamespace, dir: &Path, device_classes: &[(String, Vec<String>)]) -> Kueue {
        let build = kueue_build();
        let client = ns.client();
        install_crds_from(&client, &build.join("crds")).await;
        let dir = dir.join("kueue");
        for sub in ["etc-upper", "etc-work"] {
            std::fs::create_dir_all(dir.join(sub)).unwrap();
        }
        let ca_bundle = loopback_certificate(&dir);
        let (webhook, health) = (reserve_port(), reserve_port());
        let (webhook_port, health_port) = (webhook.number(), health.number());
        let mappings: Vec<Value> = device_classes
            .iter()
            .map(|(name, classes)| json!({"name": name, "deviceClassNames": classes}))
            .collect();
        // Kueue's own namespace (its Lease and Secrets, neither used here) must not be the test's:
        // the Pods of that namespace are never managed.
        let config = json!({
            "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "namespace": "kueue-system",
            "health": {"healthProbeBindAddress": health.loopback_addr()},
            "metrics": {"bindAddress": "0"},
            "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": dir},
            "leaderElection": {"leaderElect": false},
            "internalCertManagement": {"enable": false},
            "manageJobsWithoutQueueName": false,
            "integrations": {"frameworks": ["pod"]},
            "featureGates": {"VisibilityOnDemand": false, "DynamicResourceAllocation": true},
            "resources": {"deviceClassMappings": mappings},
        });
        std::fs::write(dir.join("config.yaml"), config.to_string()).unwrap();
        let d = dir.display();
        let script = format!(
            "set -e; mount -t overlay overlay -o lowerdir=/etc,upperdir={d}/etc-upper,workdir={d}/etc-work /etc; \
             mkdir -p /etc/kueue/metrics/certs; cp {d}/tls.crt {d}/tls.key /etc/kueue/metrics/certs/; \
             exec {} --config {d}/config.yaml --kubeconfig {}",
            build.join("kueue").display(),
            ns.cluster().kubeconfig_path().display()
        );
        let args: Vec<String> = ["--mount", "--propagation", "private", "sh", "-c", &script]
            .iter()
            .map(|a| a.to_string())
            .collect();
        let process = ComponentProcess::start_program("kueue", Path::new("unshare"), &args, &[], &dir.join("logs"))
            .unwrap()
            .holding(health)
            .holding(webhook);
        wait_ready(health_port, &process).await;
        let url = format!("https://127.0.0.1:{webhook_port}");
        let mut webhooks = vec![];
        for config in webhook_configs(&build, ns, &url, &ca_bundle) {
            let name = config["metadata"]["name"].as_str().unwrap().to_owned();
            let mutating = config["kind"] == "MutatingWebhookConfiguration";
            if mutating {
                let config: MutatingWebhookConfiguration = serde_json::from_value(config).unwrap();
                Api::all(client.clone())
                    .create(&PostParams::default(), &config)
                    .await
                    .unwrap();
            } else {
                let config: ValidatingWebhookConfiguration = serde_json::from_value(config).unwrap();
                Api::all(client.clone())
                    .create(&PostParams::default(), &config)
                    .await
                    .unwrap();
            }
            webhooks.push((mutating, name));
        }
        Kueue {
            process,
            client,
            webhooks,
        }
    }

    /// A queue for the Pods of `ns`: LocalQueue `name` of a ClusterQueue of its own with one
    /// ResourceFlavor and `quotas` (resource, nominal quota).
    pub async fn queue(&self, ns: &TestNamespace, name: &str, quotas: &[(&str, &str)]) {
        let flavor = ns.unique(&format!("{name}-flavor"));
        let cluster_queue = ns.unique(name);
        let labels = ns.owner_labels();
        self.create(
            &kueue_kind("ResourceFlavor"),
            None,
            json!({"metadata": {"name": flavor, "labels": labels}, "spec": {}}),
        )
        .await;
        let resources: Vec<Value> = quotas
            .iter()
            .map(|(resource, quota)| json!({"name": resource, "nominalQuota": quota}))
            .collect();
        let covered: Vec<&str> = quotas.iter().map(|(resource, _)| *resource).collect();
        self.create(
            &kueue_kind("ClusterQueue"),
            None,
            json!({"metadata": {"name": cluster_queue, "labels": labels}, "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns.name()}},
                "resourceGroups": [{"coveredResources": covered,
                    "flavors": [{"name": flavor, "resources": resources}]}]}}),
        )
        .await;
        self.create(
            &kueue_kind("LocalQueue"),
            Some(ns.name()),
            json!({"metadata": {"name": name}, "spec": {"clusterQueue": cluster_queue}}),
        )
        .await;
    }

    async fn create(&self, kind: &ApiResource, namespace: Option<&str>, mut body: Value) {
        body["apiVersion"] = json!(kind.api_version);
        body["kind"] = json!(kind.kind);
        let object: DynamicObject = serde_json::from_value(body).unwrap();
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, kind),
            None => Api::all_with(self.client.clone(), kind),
        };
        api.create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("creating a {}: {e}", kind.kind));
    }

    /// The Workload Kueue made for the Pod `pod` of `ns`, once `wanted` accepts it (`what` says
    /// what is awaited).
    pub async fn workload_of(
        &self,
        ns: &TestNamespace,
        pod: &str,
        what: &str,
        wanted: impl Fn(&Value) -> bool,
    ) -> Value {
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), ns.name(), &kueue_kind("Workload"));
        wait_until(
            &format!("the Workload of Pod {pod} {what}"),
            Duration::from_secs(60),
            || async {
                let list = api.list(&ListParams::default()).await?;
                let found = list
                    .items
                    .into_iter()
                    .find(|w| w.owner_references().iter().any(|o| o.kind == "Pod" && o.name == pod));
                let found = found.map(serde_json::to_value).transpose()?;
                Ok(match found {
                    Some(workload) if wanted(&workload) => Progress::Done(workload),
                    Some(workload) => Progress::Pending(format!("{}", workload["status"])),
                    None => Progress::Pending("no Workload yet".into()),
                })
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n--- kueue log ---\n{}", self.process.log()))
    }

    /// Removes what Kueue holds in `ns` while it still runs to lift its finalizers (its Pods and
    /// queues), then its webhooks; the process ends when this is dropped.
    pub async fn clean_up(self, ns: &TestNamespace) {
        let pods = ns.api::<Pod>();
        pods.delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
            .unwrap();
        let mut kinds = vec![(kueue_kind("LocalQueue"), Some(ns.name()))];
        kinds.push((kueue_kind("ClusterQueue"), None));
        kinds.push((kueue_kind("ResourceFlavor"), None));
        let owned = ListParams::default().labels(&format!("{}={}", testbed::OWNER_LABEL, ns.name()));
        for (kind, namespace) in &kinds {
            let api: Api<DynamicObject> = match namespace {
                Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, kind),
                None => Api::all_with(self.client.clone(), kind),
            };
            let which = if namespace.is_some() {
                ListParams::default()
            } else {
                owned.clone()
            };
            api.delete_collection(&DeleteParams::default(), &which).await.unwrap();
            wait_until(&format!("{}s gone", kind.kind), Duration::from_secs(60), || async {
                let left = api.list(&which).await?.items.len();
                Ok(match left {
                    0 => Progress::Done(()),
                    n => Progress::Pending(format!("{n} left")),
                })
            })
            .await
            .unwrap();
        }
        for (mutating, name) in &self.webhooks {
            let deleted = match mutating {
                true => Api::<MutatingWebhookConfiguration>::all(self.client.clone())
                    .delete(name, &DeleteParams::default())
                    .await
                    .map(|_| ()),
                false => Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
                    .delete(name, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            };
            deleted.unwrap();
        }
    }
}
