//! The DRA health service over the real socket, as a kubelet of each release calls it: advertised
//! at registration after the DRA entries, the full list at once, again on every change, and again
//! as a heartbeat within the kubelet's timeout.

mod support;

use std::sync::Arc;
use std::time::Duration;

use component_base::Shutdown;
use kubelet_plugin::{DeviceHealthReport, HEALTH_TIMEOUT_SECONDS, PluginServer, ReportedHealth};
use kubelet_plugin_api::registration::InfoRequest;
use kubelet_plugin_api::registration::registration_client::RegistrationClient;
use kubelet_plugin_api::{connect_unix_socket, dra_health_v1 as v1, dra_health_v1alpha1 as v1alpha1};
use support::{FakePreparer, config};
use tokio::sync::watch;

fn report(device: &str, health: ReportedHealth, message: &str) -> DeviceHealthReport {
    DeviceHealthReport {
        pool_name: "gpus/node-a".into(),
        device_name: device.into(),
        health,
        message: message.into(),
    }
}

#[tokio::test]
async fn the_kubelet_gets_the_full_list_on_connect_change_and_heartbeat() {
    let root = tempfile::tempdir().unwrap();
    let (feed, receiver) = watch::channel(vec![
        report("gpu0", ReportedHealth::Healthy, ""),
        report("gpu0-mig-1g6gb-0", ReportedHealth::Healthy, ""),
    ]);
    let shutdown = Shutdown::new();
    let server = PluginServer::start_with_health(
        config(root.path()),
        Arc::new(FakePreparer::default()),
        Some(receiver),
        shutdown.clone(),
    )
    .await
    .unwrap();

    let mut registration = RegistrationClient::new(connect_unix_socket(server.registration_socket()).await.unwrap());
    let info = registration.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(
        info.supported_versions,
        [
            "v1.DRAPlugin",
            "v1beta1.DRAPlugin",
            "v1.DRAResourceHealth",
            "v1beta1.DRAResourceHealth",
            "v1alpha1.DRAResourceHealth"
        ]
    );

    // A 1.37 kubelet speaks v1.
    let channel = connect_unix_socket(server.dra_socket()).await.unwrap();
    let mut client = v1::dra_resource_health_client::DraResourceHealthClient::new(channel.clone());
    let mut stream = client
        .node_watch_resources(v1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let first = stream.message().await.unwrap().unwrap();
    let names: Vec<&str> = first
        .devices
        .iter()
        .map(|d| d.device.as_ref().unwrap().device_name.as_str())
        .collect();
    assert_eq!(names, ["gpu0", "gpu0-mig-1g6gb-0"]);
    assert!(
        first
            .devices
            .iter()
            .all(|d| d.health == v1::HealthStatus::Healthy as i32
                && d.health_check_timeout_seconds == HEALTH_TIMEOUT_SECONDS)
    );

    feed.send_replace(vec![
        report("gpu0", ReportedHealth::Unhealthy, "critical Xid 79"),
        report("gpu0-mig-1g6gb-0", ReportedHealth::Unhealthy, "critical Xid 79"),
    ]);
    let changed = stream.message().await.unwrap().unwrap();
    assert_eq!(changed.devices.len(), 2, "the full list, every time");
    assert_eq!(changed.devices[0].health, v1::HealthStatus::Unhealthy as i32);
    assert_eq!(changed.devices[0].message, "critical Xid 79");

    // Nothing changes: the list comes again well within the kubelet's 30 s.
    let heartbeat = tokio::time::timeout(Duration::from_secs(HEALTH_TIMEOUT_SECONDS as u64), stream.message())
        .await
        .expect("a heartbeat within the kubelet's timeout")
        .unwrap()
        .unwrap();
    assert_eq!(
        heartbeat.devices,
        changed
            .devices
            .iter()
            .map(|d| v1::DeviceHealth {
                last_updated_time: heartbeat.devices[0].last_updated_time,
                ..d.clone()
            })
            .collect::<Vec<_>>()
    );
    assert!(heartbeat.devices[0].last_updated_time >= changed.devices[0].last_updated_time);

    // A 1.34-1.36 kubelet speaks v1alpha1 on the same socket.
    let mut old = v1alpha1::dra_resource_health_client::DraResourceHealthClient::new(channel);
    let mut old_stream = old
        .node_watch_resources(v1alpha1::NodeWatchResourcesRequest {})
        .await
        .unwrap()
        .into_inner();
    let listed = old_stream.message().await.unwrap().unwrap();
    assert_eq!(listed.devices[1].health, v1alpha1::HealthStatus::Unhealthy as i32);
    shutdown.trigger();
    server.stopped().await;
}
