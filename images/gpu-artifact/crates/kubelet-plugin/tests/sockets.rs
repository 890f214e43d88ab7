//! Restart safety of the sockets: what a crashed process left is replaced, a live process's socket
//! is never taken, and a clean shutdown leaves no socket files.

mod support;

use std::sync::Arc;

use component_base::Shutdown;
use kubelet_plugin::{PluginServer, SocketError};
use kubelet_plugin_api::registration::InfoRequest;
use kubelet_plugin_api::registration::registration_client::RegistrationClient;
use kubelet_plugin_api::{connect_unix_socket, dra_v1 as v1};
use support::{FakePreparer, config, start_plugin};

#[tokio::test]
async fn sockets_left_by_a_crashed_process_are_replaced() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    for socket in [config.dra_socket(), config.registration_socket()] {
        std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
        // Bound and never cleaned up: the file stays, nobody listens (a crash).
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        assert!(socket.exists());
    }

    let shutdown = Shutdown::new();
    let preparer = Arc::new(FakePreparer::default());
    let server = PluginServer::start(config.clone(), preparer, shutdown.clone())
        .await
        .expect("stale sockets are replaced");

    let mut registration = RegistrationClient::new(connect_unix_socket(&config.registration_socket()).await.unwrap());
    let info = registration.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.name, "gpu.deckhouse.io");
    let mut dra = v1::dra_plugin_client::DraPluginClient::new(connect_unix_socket(&config.dra_socket()).await.unwrap());
    let answer = dra
        .node_unprepare_resources(v1::NodeUnprepareResourcesRequest { claims: vec![] })
        .await
        .unwrap();
    assert!(answer.into_inner().claims.is_empty());

    shutdown.trigger();
    server.stopped().await;
}

#[tokio::test]
async fn a_live_servers_sockets_are_not_stolen() {
    let first = start_plugin().await;
    let second = PluginServer::start(
        config(first.root.path()),
        Arc::new(FakePreparer::default()),
        Shutdown::new(),
    )
    .await;
    match second {
        Err(SocketError::InUse { path }) => assert_eq!(path, first.server.dra_socket()),
        Err(other) => panic!("expected the DRA socket to be refused as in use, got {other}"),
        Ok(_) => panic!("a second plugin took over a live plugin's sockets"),
    }

    let mut registration =
        RegistrationClient::new(connect_unix_socket(first.server.registration_socket()).await.unwrap());
    let info = registration.get_info(InfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.endpoint, first.server.dra_socket().to_string_lossy());
    assert!(
        first.server.dra_socket().exists(),
        "the first plugin keeps its DRA socket"
    );
}

#[tokio::test]
async fn shutdown_removes_both_sockets() {
    let plugin = start_plugin().await;
    let dra = plugin.server.dra_socket().to_owned();
    let registration = plugin.server.registration_socket().to_owned();
    assert!(dra.exists() && registration.exists());

    plugin.shutdown.trigger();
    plugin.server.stopped().await;
    assert!(!dra.exists(), "{} left behind", dra.display());
    assert!(!registration.exists(), "{} left behind", registration.display());
}

#[tokio::test]
async fn a_live_registration_socket_leaves_no_dra_socket_behind() {
    let root = tempfile::tempdir().unwrap();
    let config = config(root.path());
    std::fs::create_dir_all(config.registration_socket().parent().unwrap()).unwrap();
    // Another process serves the registration socket (say, a second instance of the plugin).
    let _other = tokio::net::UnixListener::bind(config.registration_socket()).unwrap();

    let started = PluginServer::start(config.clone(), Arc::new(FakePreparer::default()), Shutdown::new()).await;
    assert!(
        matches!(&started, Err(SocketError::InUse { path }) if path == &config.registration_socket()),
        "{:?}",
        started.as_ref().err()
    );
    assert!(!config.dra_socket().exists(), "the DRA socket is removed again");
    assert!(
        config.registration_socket().exists(),
        "the other process keeps its socket"
    );
}

#[tokio::test]
async fn only_the_owner_may_connect_to_the_sockets() {
    use std::os::unix::fs::PermissionsExt;
    let plugin = start_plugin().await;
    for socket in [plugin.server.dra_socket(), plugin.server.registration_socket()] {
        let mode = std::fs::metadata(socket).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode,
            0o600,
            "{}: {mode:o}, whatever the process's umask",
            socket.display()
        );
    }
    plugin.shutdown.trigger();
    plugin.server.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_listener_is_closed_says_it_stopped_and_why() {
    let plugin = start_plugin().await;
    let mut stopped = plugin.server.stopped_serving();
    assert_eq!(*stopped.borrow(), None, "both serve");
    // A connection the server keeps (as the kubelet's health stream is kept): the stop is said
    // while the server still drains it.
    let kept = tokio::net::UnixStream::connect(plugin.server.dra_socket())
        .await
        .unwrap();
    testbed::close_listener(std::process::id(), plugin.server.dra_socket());
    let reason = stopped.wait_for(Option::is_some).await.unwrap().clone().unwrap();
    assert!(
        reason.starts_with("the DRA server stopped: its listening socket was shut down"),
        "{reason}"
    );
    // Its socket is gone: the kubelet sees no plugin rather than one that never answers.
    assert!(!plugin.server.dra_socket().exists());

    testbed::close_listener(std::process::id(), plugin.server.registration_socket());
    let reason = stopped
        .wait_for(|r| r.as_deref().is_some_and(|r| r.contains("registration")))
        .await
        .unwrap()
        .clone()
        .unwrap();
    assert!(reason.contains("; the registration server stopped: "), "{reason}");
    drop(kept);
    plugin.shutdown.trigger();
    plugin.server.stopped().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_socket_file_is_removed_says_it_stopped_and_why() {
    let plugin = start_plugin().await;
    let mut stopped = plugin.server.stopped_serving();
    // The listener still accepts, but the kubelet finds the plugin by its path.
    std::fs::remove_file(plugin.server.registration_socket()).unwrap();
    let reason = stopped.wait_for(Option::is_some).await.unwrap().clone().unwrap();
    assert!(
        reason.starts_with("the registration server stopped: its socket file ")
            && reason.ends_with("was removed or replaced, so the kubelet cannot reach it"),
        "{reason}"
    );
    plugin.shutdown.trigger();
    plugin.server.stopped().await;
}
