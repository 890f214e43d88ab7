//! Clients that act as a ServiceAccount bound to exactly the RBAC rules a test gives, so tests see
//! the 403s a component would see in a real cluster.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::PostParams;
use kube::config::AuthInfo;
use kube::core::ObjectMeta;
use kube::{Api, Client};

use crate::{Progress, TestNamespace, wait_until};

/// The RBAC rules a minted ServiceAccount gets.
pub enum Access {
    /// A ClusterRole + ClusterRoleBinding (cleaned up with the test).
    Cluster(Vec<PolicyRule>),
    /// A Role + RoleBinding in the test's namespace.
    Namespaced(Vec<PolicyRule>),
    /// Both: cluster-wide rules and rules in the test's namespace (a controller's own Lease).
    ClusterAndNamespaced(Vec<PolicyRule>, Vec<PolicyRule>),
}

impl TestNamespace {
    /// Creates ServiceAccount `name` in this namespace, binds `access` to it, mints a token through
    /// the TokenRequest API, waits until the authorizer honours the binding, and returns a client
    /// that authenticates with that token only.
    pub async fn client_as(&self, name: &str, access: Access) -> anyhow::Result<Client> {
        let config = self.config_as(name, access).await?;
        Ok(Client::try_from(config)?)
    }

    /// Like [`Self::client_as`], but writes a kubeconfig file (in `dir`) for a component process.
    pub async fn kubeconfig_as(
        &self,
        name: &str,
        access: Access,
        dir: &std::path::Path,
    ) -> anyhow::Result<std::path::PathBuf> {
        let config = self.config_as(name, access).await?;
        let mut kubeconfig = kube::config::Kubeconfig::read_from(self.cluster().kubeconfig_path())?;
        let token = config.auth_info.token.clone();
        kubeconfig.auth_infos.truncate(1);
        if let Some(user) = kubeconfig.auth_infos.first_mut() {
            user.auth_info = Some(AuthInfo {
                token,
                ..AuthInfo::default()
            });
        }
        let path = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&path, serde_json::to_string(&kubeconfig)?)?;
        Ok(path)
    }

    async fn config_as(&self, name: &str, access: Access) -> anyhow::Result<kube::Config> {
        let client = self.client();
        let ns = self.name();
        let accounts = Api::<ServiceAccount>::namespaced(client.clone(), ns);
        let account = ServiceAccount {
            metadata: meta(name, Some(ns)),
            ..ServiceAccount::default()
        };
        accounts.create(&PostParams::default(), &account).await?;
        let subject = Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(ns.into()),
            ..Subject::default()
        };
        // The first rule of each binding is asked of the authorizer before the token is handed out.
        let probes: Vec<PolicyRule> = match &access {
            Access::Cluster(rules) | Access::Namespaced(rules) => rules.first().cloned().into_iter().collect(),
            Access::ClusterAndNamespaced(cluster, namespaced) => {
                cluster.first().into_iter().chain(namespaced.first()).cloned().collect()
            }
        };
        match access {
            Access::Cluster(rules) => self.bind_cluster_role(&client, name, rules, subject).await?,
            Access::Namespaced(rules) => self.bind_role(name, rules, subject).await?,
            Access::ClusterAndNamespaced(cluster, namespaced) => {
                self.bind_cluster_role(&client, name, cluster, subject.clone()).await?;
                self.bind_role(name, namespaced, subject).await?;
            }
        }

        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(3600),
                ..TokenRequestSpec::default()
            },
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await?
            .status
            .map(|status| status.token)
            .ok_or_else(|| anyhow::anyhow!("TokenRequest for {ns}/{name} returned no token"))?;

        for rule in &probes {
            self.wait_until_authorized(&client, name, rule).await?;
        }
        let mut config = self.cluster().config().clone();
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        };
        Ok(config)
    }

    async fn bind_cluster_role(
        &self,
        client: &Client,
        name: &str,
        rules: Vec<PolicyRule>,
        subject: Subject,
    ) -> anyhow::Result<()> {
        let role_name = self.unique(name);
        let mut role_meta = meta(&role_name, None);
        role_meta.labels = Some(self.owner_labels());
        let role = ClusterRole {
            metadata: role_meta.clone(),
            rules: Some(rules),
            ..ClusterRole::default()
        };
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await?;
        let binding = ClusterRoleBinding {
            metadata: role_meta,
            role_ref: role_ref("ClusterRole", &role_name),
            subjects: Some(vec![subject]),
        };
        Api::<ClusterRoleBinding>::all(client.clone())
            .create(&PostParams::default(), &binding)
            .await?;
        Ok(())
    }

    async fn bind_role(&self, name: &str, rules: Vec<PolicyRule>, subject: Subject) -> anyhow::Result<()> {
        let role = Role {
            metadata: meta(name, Some(self.name())),
            rules: Some(rules),
        };
        self.api::<Role>().create(&PostParams::default(), &role).await?;
        let binding = RoleBinding {
            metadata: meta(name, Some(self.name())),
            role_ref: role_ref("Role", name),
            subjects: Some(vec![subject]),
        };
        self.api::<RoleBinding>()
            .create(&PostParams::default(), &binding)
            .await?;
        Ok(())
    }

    /// A token of ServiceAccount `account` (made by [`Self::client_as`]) bound to Pod `pod` of this
    /// namespace, as the kubelet mounts one into a Pod: the API server records the Pod's node in the
    /// token, and requests with it carry `authentication.kubernetes.io/node-name`.
    pub async fn client_bound_to_pod(
        &self,
        account: &str,
        pod: &k8s_openapi::api::core::v1::Pod,
    ) -> anyhow::Result<Client> {
        let accounts = Api::<ServiceAccount>::namespaced(self.client(), self.name());
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: vec![],
                expiration_seconds: Some(3600),
                bound_object_ref: Some(k8s_openapi::api::authentication::v1::BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
            },
            ..TokenRequest::default()
        };
        let token = accounts
            .create_token_request(account, &PostParams::default(), &request)
            .await?
            .status
            .map(|status| status.token)
            .ok_or_else(|| anyhow::anyhow!("TokenRequest for {account} bound to a Pod returned no token"))?;
        let mut config = self.cluster().config().clone();
        config.auth_info = AuthInfo {
            token: Some(token.into()),
            ..AuthInfo::default()
        };
        Ok(Client::try_from(config)?)
    }

    /// RBAC is served from the authorizer's cache; wait until it allows the first rule.
    async fn wait_until_authorized(&self, client: &Client, account: &str, rule: &PolicyRule) -> anyhow::Result<()> {
        let user = format!("system:serviceaccount:{}:{account}", self.name());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.clone()),
                resource_attributes: Some(ResourceAttributes {
                    group: rule.api_groups.as_ref().and_then(|g| g.first().cloned()),
                    resource: rule.resources.as_ref().and_then(|r| r.first().cloned()),
                    verb: rule.verbs.first().cloned(),
                    namespace: Some(self.name().to_owned()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviews = Api::<SubjectAccessReview>::all(client.clone());
        wait_until(&format!("RBAC to allow {user}"), Duration::from_secs(10), || async {
            let answer = reviews.create(&PostParams::default(), &review).await?;
            Ok(match answer.status {
                Some(status) if status.allowed => Progress::Done(()),
                other => Progress::Pending(format!("{other:?}")),
            })
        })
        .await
    }
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: kind.into(),
        name: name.into(),
    }
}
