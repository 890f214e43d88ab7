//! The components the monitoring test runs beside the plugin node: controllers of the module under
//! their RBAC, gpu-controller kept from leading by a Lease someone else holds, and their scrapes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use testbed::{ComponentProcess, Progress, TestNamespace, wait_until};

use super::monitoring_queries::scrape;
use super::support::components::{self, AgentWorkspace, kubeconfig_with_lease};
use super::support::create;

/// Who holds gpu-controller's Lease in this test.
pub const LEASE_HOLDER: &str = "another-replica";

/// Lease `name` in `ns`, held by someone else for an hour: a controller competing for it waits.
pub async fn hold_lease(ns: &TestNamespace, name: &str) {
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(LEASE_HOLDER.to_owned()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(MicroTime(Timestamp::now())),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..LeaseSpec::default()
        }),
    };
    create(&ns.api::<Lease>(), &lease).await;
}

/// Starts controller `name` of the module under `rules`, its Lease in `ns`; returns the process,
/// its health and metrics port once it is ready, and its kubeconfig (to start it again).
pub async fn start_controller(
    ns: &TestNamespace,
    ws: &AgentWorkspace,
    name: &str,
    rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
) -> (ComponentProcess, u16, PathBuf) {
    let kubeconfig = kubeconfig_with_lease(ns, name, rules, ws.dir.path()).await;
    let (process, port) = launch_controller(ns, ws, name, &kubeconfig).await;
    (process, port, kubeconfig)
}

/// Starts (or starts again) controller `name` with `kubeconfig`; returns once it is ready.
pub async fn launch_controller(
    ns: &TestNamespace,
    ws: &AgentWorkspace,
    name: &str,
    kubeconfig: &Path,
) -> (ComponentProcess, u16) {
    let validators = [("VALIDATOR_NAMESPACE", ns.name().to_owned())];
    components::launch_controller(ns, ws, name, kubeconfig, &validators).await
}

/// Scrapes `port` until `done` holds for the text; returns it.
pub async fn metrics_when(port: u16, process: &ComponentProcess, what: &str, done: impl Fn(&str) -> bool) -> String {
    wait_until(what, Duration::from_secs(60), || async {
        let text = scrape(port)?;
        Ok(if done(&text) {
            Progress::Done(text)
        } else {
            let ours: Vec<&str> = text.lines().filter(|l| l.starts_with("gpu_")).collect();
            Progress::Pending(ours.join("\n"))
        })
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- {} log ---\n{}", process.name(), process.log()))
}
