//! The registration handshake from the kubelet's side, against the real plugin transport.

use std::sync::Arc;
use std::time::Duration;

use component_base::Shutdown;
use kubelet_plugin::{ClaimPreparer, ClaimRef, PluginConfig, PluginServer, PreparedDevice};
use kubelet_sim::{KubeletSim, KubeletSimOptions};
use testbed::{Progress, TestCluster, wait_until};

struct NoDevices;

impl ClaimPreparer for NoDevices {
    async fn prepare(&self, _claim: ClaimRef) -> Result<Vec<PreparedDevice>, String> {
        Ok(vec![])
    }

    async fn unprepare(&self, _claim: ClaimRef) -> Result<(), String> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_a_common_version_is_rejected_with_the_reason() {
    let cluster = TestCluster::get().await.unwrap();
    let root = tempfile::tempdir().unwrap();
    let config = PluginConfig {
        kubelet_root: root.path().to_owned(),
        ..PluginConfig::default()
    };
    let shutdown = Shutdown::new();
    let plugin = PluginServer::start(config, Arc::new(NoDevices), shutdown.clone())
        .await
        .unwrap();
    // A kubelet that supports no DRA service at all: nothing the plugin offers can match.
    let options = KubeletSimOptions {
        supported_versions: vec![],
        ..KubeletSimOptions::default()
    };
    let sim = KubeletSim::start(cluster.client(), "no-such-node-registration-test", root.path(), options);

    let registration = wait_until("the plugin to be seen", Duration::from_secs(10), || async {
        Ok(match sim.plugins().remove("gpu.deckhouse.io") {
            Some(registration) => Progress::Done(registration),
            None => Progress::Pending("no handshake yet".into()),
        })
    })
    .await
    .unwrap();
    assert_eq!(registration.version, None);
    let error = registration.error.unwrap();
    assert!(
        error.contains(r#"none of the versions ["v1.DRAPlugin", "v1beta1.DRAPlugin"] of plugin gpu.deckhouse.io"#),
        "{error}"
    );
    assert_eq!(registration.endpoint, plugin.dra_socket().to_string_lossy());
    let mut registered = plugin.registered();
    let accepted = tokio::time::timeout(Duration::from_millis(500), registered.wait_for(|r| *r)).await;
    assert!(accepted.is_err(), "the plugin must be told it is not registered");

    sim.stop().await;
    shutdown.trigger();
    plugin.stopped().await;
}
