//! The test bed's stand-in for Deckhouse's addon-operator, for the real node: it installs the module
//! the way Deckhouse does and keeps it converged. Once: the module's `onStartup` hooks. Then every
//! round (as Deckhouse runs on every event of what the hooks watch): the `beforeHelm` hooks in order
//! through their own protocol ([`hooks`]), the chart rendered by the real helm with the resulting
//! values ([`values`], [`manifests`]), and what changed applied; the chart's NodeGroupConfigurations run
//! on the node as bashible runs them ([`bashible`]). It also provides what Deckhouse's own modules give
//! every module: the `d8:rbac-proxy` ClusterRole the kube-rbac-proxy sidecars bind.

pub mod bashible;
pub mod hooks;
pub mod manifests;
pub mod values;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::{Api, Client};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use hooks::Hooks;
use values::ImagesFile;

pub struct OperatorConfig {
    /// The module's root (Chart.yaml, templates, openapi, crds).
    pub chart: PathBuf,
    pub images: PathBuf,
    pub helm: PathBuf,
    pub hooks_binary: PathBuf,
    /// The operator ends when this process does (the node's init).
    pub owner_pid: Option<u32>,
    /// The node's host (the fixture host), where the chart's NodeGroupConfigurations run; none: they
    /// do not run.
    pub node_host: Option<PathBuf>,
}

const ROUND: Duration = Duration::from_secs(2);

pub async fn run(config: OperatorConfig) -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let images = ImagesFile::load(&config.images)?;
    let version = client.apiserver_version().await?.git_version;
    let ca = Api::<ConfigMap>::namespaced(client.clone(), "default")
        .get("kube-root-ca.crt")
        .await
        .context("the cluster's CA (ConfigMap default/kube-root-ca.crt)")?;
    let ca_pem = ca.data.and_then(|d| d.get("ca.crt").cloned()).unwrap_or_default();
    let nodes = Api::<Node>::all(client.clone()).list(&Default::default()).await?;
    let counts = values::NodeCounts::of(nodes.items.iter().filter_map(|n| n.metadata.labels.as_ref()));
    let mut values = values::initial(&config.chart, &images, &version, &ca_pem, &counts)?;
    manifests::apply_object(&client, &rbac_proxy_role(), "deckhouse").await?;
    let crds = manifests::install_crds(&client, &config.chart).await?;
    log(&format!("installed the module's CRDs: {crds:?}"));

    let env = vec![(
        "GPU_MODULE_CRDS_DIR".to_owned(),
        config.chart.join("crds").display().to_string(),
    )];
    let hooks = Hooks::load(&config.hooks_binary, env)?;
    for hook in hooks.phase(|h| h.on_startup) {
        while let Err(error) = hooks.run(&client, &hook, "onStartup", &mut values).await {
            log(&format!("onStartup hook {} failed, retrying: {error:#}", hook.name));
            tokio::time::sleep(ROUND).await;
        }
        log(&format!("onStartup hook {} ran", hook.name));
    }
    let mut applied = BTreeSet::new();
    let mut last_render = String::new();
    let mut bashible = config
        .node_host
        .clone()
        .map(|host| bashible::Bashible::new(config.helm.clone(), host));
    loop {
        if config
            .owner_pid
            .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        {
            return Ok(());
        }
        match round(
            &client,
            &config,
            &hooks,
            &mut values,
            &mut applied,
            &mut last_render,
            &mut bashible,
        )
        .await
        {
            Ok(Some(summary)) => log(&summary),
            Ok(None) => {}
            Err(error) => log(&format!("round failed: {error:#}")),
        }
        tokio::time::sleep(ROUND).await;
    }
}

/// One round; a summary when something was applied.
async fn round(
    client: &Client,
    config: &OperatorConfig,
    hooks: &Hooks,
    values: &mut Value,
    applied: &mut BTreeSet<manifests::ObjectKey>,
    last_render: &mut String,
    bashible: &mut Option<bashible::Bashible>,
) -> anyhow::Result<Option<String>> {
    // A module release brings new image digests: the file is read again each round, as Deckhouse
    // renders a new release with its own (the real node's tests upgrade gpu-handler's image so).
    let images = ImagesFile::load(&config.images)?;
    values["global"]["modulesImages"]["digests"] = images.digests;
    for hook in hooks.phase(|h| h.before_helm) {
        hooks.run(client, &hook, "beforeHelm", values).await?;
    }
    let objects = manifests::render(&config.helm, &config.chart, values)?;
    let digest = format!("{:x}", Sha256::digest(serde_json::to_vec(&objects)?));
    if digest == *last_render {
        return Ok(None);
    }
    let (done, errors) = manifests::apply_all(client, &objects, applied).await;
    *applied = done;
    let steps = match bashible {
        Some(bashible) => bashible.converge(&objects)?,
        None => Vec::new(),
    };
    if errors.is_empty() {
        last_render.clone_from(&digest);
    }
    Ok(Some(format!(
        "applied {} objects (render {}), node configuration steps run: {steps:?}, errors: {errors:?}",
        applied.len(),
        &digest[..12],
    )))
}

/// What Deckhouse's own modules bind every kube-rbac-proxy to: TokenReviews and SubjectAccessReviews.
fn rbac_proxy_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "d8:rbac-proxy", "labels": {"heritage": "deckhouse"}},
        "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        ],
    })
}

fn log(message: &str) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    println!("{now} {message}");
}
