//! A control plane of the test's own with other DRA gates than the shared test bed, at the version
//! of the shared test bed when `GPU_TESTBED_KUBECONFIG` names one (else `K8S`, else 1.34). It stops
//! when the test process exits; its state lives in the run's directory ([`start_control_plane`]).

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use testbed::{TestCluster, start_control_plane};

/// `1.34` or `latest`: the release the shared test bed runs.
pub async fn release() -> String {
    if std::env::var_os("GPU_TESTBED_KUBECONFIG").is_some() {
        let minor = TestCluster::get().await.unwrap().server_minor().await.unwrap();
        if minor <= 34 { "1.34" } else { "latest" }.to_owned()
    } else {
        std::env::var("K8S").unwrap_or_else(|_| "1.34".into())
    }
}

/// Starts the control plane with the gates `gates(release)` returns; returns a client of it.
pub async fn cluster_with_gates(name: &str, gates: impl Fn(&str) -> &'static str) -> Client {
    let release = release().await;
    let gates = gates(&release);
    let name = name.to_owned();
    let kubeconfig = tokio::task::spawn_blocking(move || start_control_plane(&release, &name, Some(gates)))
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("{e:#}"));
    let kubeconfig = Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}
