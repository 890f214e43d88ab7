//! The registration handshake as the kubelet's plugin watcher does it, over the real socket.

mod support;

use std::time::Duration;

use kubelet_plugin_api::connect_unix_socket;
use kubelet_plugin_api::registration::registration_client::RegistrationClient;
use kubelet_plugin_api::registration::{InfoRequest, PluginInfo, RegistrationStatus};
use support::start_plugin;

#[tokio::test]
async fn get_info_names_the_driver_its_endpoint_and_v1_first() {
    let plugin = start_plugin().await;
    let registry = plugin.root.path().join("plugins_registry/gpu.deckhouse.io-reg.sock");
    assert_eq!(plugin.server.registration_socket(), registry);

    let mut client = RegistrationClient::new(connect_unix_socket(&registry).await.unwrap());
    let info = client.get_info(InfoRequest {}).await.unwrap().into_inner();

    let endpoint = plugin.root.path().join("plugins/gpu.deckhouse.io/dra.sock");
    assert_eq!(
        info,
        PluginInfo {
            r#type: "DRAPlugin".into(),
            name: "gpu.deckhouse.io".into(),
            endpoint: endpoint.to_string_lossy().into_owned(),
            supported_versions: vec!["v1.DRAPlugin".into(), "v1beta1.DRAPlugin".into()],
        }
    );
    assert!(
        endpoint.exists(),
        "the DRA socket is served before registration is offered"
    );
}

#[tokio::test]
async fn registration_status_reaches_registered() {
    let plugin = start_plugin().await;
    let mut registered = plugin.server.registered();
    assert!(!*registered.borrow(), "not registered before the kubelet says so");

    let channel = connect_unix_socket(plugin.server.registration_socket()).await.unwrap();
    let mut client = RegistrationClient::new(channel);
    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), registered.wait_for(|r| *r))
        .await
        .expect("registered turns true")
        .unwrap();

    client
        .notify_registration_status(RegistrationStatus {
            plugin_registered: false,
            error: "no supported DRA version".into(),
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), registered.wait_for(|r| !*r))
        .await
        .expect("a rejection turns registered false again")
        .unwrap();
}
