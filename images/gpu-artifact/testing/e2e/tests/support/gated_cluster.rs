//! A control plane of the test's own with other DRA gates than the shared test bed, at the version
//! of the shared test bed when `GPU_TESTBED_KUBECONFIG` names one (else `K8S`, else 1.34). It stops
//! when the test process exits; its state stays in `.testbed/<name>-<release>` until the next run.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use testbed::TestCluster;

/// `1.34` or `latest`: the release the shared test bed runs.
async fn release() -> String {
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
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../..");
    // One directory per release: cluster-up.sh clears it, so runs do not pile up state.
    let dir = repo.join(".testbed").join(format!("{name}-{release}"));
    let script = repo.join("tools/testbed/cluster-up.sh");
    let kubeconfig = tokio::task::spawn_blocking(move || -> PathBuf {
        let output = Command::new(script)
            .arg(&release)
            .env("TESTBED_DIR", &dir)
            .env("TESTBED_OWNER_PID", std::process::id().to_string())
            .env("TESTBED_FEATURE_GATES", gates)
            .output()
            .expect("run cluster-up.sh");
        assert!(
            output.status.success(),
            "cluster-up.sh {release} with {gates} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
    })
    .await
    .unwrap();
    let kubeconfig = Kubeconfig::read_from(&kubeconfig).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}
