//! One isolated namespace per test, and the cleanup of everything the test made.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::core::{ApiResource, DynamicObject, ObjectMeta};
use kube::{Api, Client, Resource};

use crate::{Progress, TestCluster, wait_until};

/// Label on every cluster-scoped object a test makes: the name of the test's namespace.
pub const OWNER_LABEL: &str = "testbed.gpu.deckhouse.io/namespace";

/// Cluster-scoped kinds a test may create; removed by label when the test ends. Kinds the server
/// does not serve (a CRD not installed yet) are skipped.
fn cluster_scoped_kinds() -> Vec<ApiResource> {
    vec![
        ApiResource::erase::<Node>(&()),
        ApiResource::erase::<ResourceSlice>(&()),
        ApiResource::erase::<DeviceClass>(&()),
        ApiResource::erase::<ClusterRoleBinding>(&()),
        ApiResource::erase::<ClusterRole>(&()),
        // A webhook a failed test leaves would answer for a process that is gone.
        ApiResource::erase::<MutatingWebhookConfiguration>(&()),
        ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
        ApiResource::erase::<ValidatingAdmissionPolicyBinding>(&()),
        ApiResource::erase::<ValidatingAdmissionPolicy>(&()),
        ApiResource {
            group: "gpu.deckhouse.io".into(),
            version: "v1alpha1".into(),
            api_version: "gpu.deckhouse.io/v1alpha1".into(),
            kind: "PhysicalGPU".into(),
            plural: "physicalgpus".into(),
        },
        ApiResource {
            group: "gpu.deckhouse.io".into(),
            version: "v1alpha1".into(),
            api_version: "gpu.deckhouse.io/v1alpha1".into(),
            kind: "GPUClass".into(),
            plural: "gpuclasses".into(),
        },
    ]
}

/// A namespace of its own for one test. Dropping it deletes the namespace and the test's
/// cluster-scoped objects.
pub struct TestNamespace {
    name: String,
    cluster: TestCluster,
}

impl TestNamespace {
    /// Creates `t-<test>-xxxxx` and waits for its `default` ServiceAccount, which Pod admission needs.
    pub async fn create(test: &str) -> anyhow::Result<Self> {
        Self::create_in(TestCluster::get().await?, test).await
    }

    /// [`Self::create`] on `cluster` (a private control plane, say).
    pub async fn create_in(cluster: TestCluster, test: &str) -> anyhow::Result<Self> {
        let client = cluster.client();
        let prefix: String = test
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .take(40)
            .collect();
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("t-{}-", prefix.trim_matches('-'))),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let created = Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await?;
        let name = created
            .metadata
            .name
            .expect("the server names a generateName namespace");
        let accounts = Api::<ServiceAccount>::namespaced(client, &name);
        wait_until(
            &format!("ServiceAccount {name}/default"),
            Duration::from_secs(30),
            || async {
                Ok(match accounts.get_opt("default").await? {
                    Some(_) => Progress::Done(()),
                    None => Progress::Pending("not created by the controller-manager yet".into()),
                })
            },
        )
        .await?;
        Ok(Self { name, cluster })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn cluster(&self) -> &TestCluster {
        &self.cluster
    }

    /// A fresh admin client for the calling test.
    pub fn client(&self) -> Client {
        self.cluster.client()
    }

    /// A name for a cluster-scoped object that cannot clash with another test's: `<namespace>-<suffix>`.
    pub fn unique(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.name)
    }

    /// Labels that tie a cluster-scoped object to this test for cleanup.
    pub fn owner_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(OWNER_LABEL.to_owned(), self.name.clone())])
    }

    /// A namespaced API in this test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client(), &self.name)
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let name = self.name.clone();
        let config = self.cluster.config().clone();
        // Drop cannot await, and the test's runtime may be shutting down: clean up on a runtime of our own.
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            runtime.block_on(async move {
                let client = Client::try_from(config).expect("cleanup client");
                delete_owned(client, &name).await;
            });
        });
        let _ = cleanup.join();
    }
}

async fn delete_owned(client: Client, namespace: &str) {
    let selector = ListParams::default().labels(&format!("{OWNER_LABEL}={namespace}"));
    for resource in cluster_scoped_kinds() {
        let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
        if let Err(error) = api.delete_collection(&DeleteParams::background(), &selector).await
            && !matches!(&error, kube::Error::Api(status) if status.code == 404)
        {
            tracing::warn!(kind = %resource.kind, %error, "test cleanup failed");
        }
    }
    let _ = Api::<Namespace>::all(client)
        .delete(namespace, &DeleteParams::background())
        .await;
}
