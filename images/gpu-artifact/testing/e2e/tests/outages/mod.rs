//! The outage test's node: a private control plane (its servers are killed), an A30 node whose
//! node agent, gpu-handler and kubelet simulator reach the API server through a loopback TCP proxy
//! that can cut every connection at once (every watch dropped), and what the test reads back.

#![allow(dead_code)]

mod bed;

pub use bed::Bed;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gpu_api::PhysicalGPU;
use host_fixtures::{HostTree, NamedHost, ToolStandIns};
use kube::{Api, Client};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A new Pod after an API outage also waits for the upstream kube-scheduler and
/// kube-controller-manager to list again (their client-go backoff, not ours); our components keep
/// [`RESYNC_DEADLINE`].
pub const SCHEDULING_DEADLINE: Duration = Duration::from_secs(30);

/// A TCP proxy on loopback to the API server's port; [`ApiProxy::cut`] closes every connection.
pub struct ApiProxy {
    pub port: u16,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
    _listener: JoinHandle<()>,
}

impl ApiProxy {
    pub async fn start(target: u16) -> ApiProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let tracked = Arc::clone(&connections);
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let relay = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                tracked.lock().unwrap().push(relay);
            }
        });
        ApiProxy {
            port,
            connections,
            _listener: accept,
        }
    }

    /// Drops every open connection (every watch and pooled connection); new ones are accepted.
    pub fn cut(&self) -> usize {
        let open: Vec<JoinHandle<()>> = std::mem::take(&mut *self.connections.lock().unwrap());
        let count = open.iter().filter(|relay| !relay.is_finished()).count();
        for relay in open {
            relay.abort();
        }
        count
    }
}

/// The API server's port in a kubeconfig's `server`.
pub fn api_port(kubeconfig: &Path) -> u16 {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let start = text.find("https://127.0.0.1:").expect("a loopback server") + "https://127.0.0.1:".len();
    text[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

/// Points a component's kubeconfig at the proxy.
pub fn through_proxy(kubeconfig: &Path, api: u16, proxy: u16) {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    std::fs::write(
        kubeconfig,
        text.replace(&format!("127.0.0.1:{api}"), &format!("127.0.0.1:{proxy}")),
    )
    .unwrap();
}

/// An admin client through the proxy.
pub fn client_through(config: &kube::Config, proxy: u16) -> Client {
    let mut config = config.clone();
    config.cluster_url = format!("https://127.0.0.1:{proxy}").parse().unwrap();
    Client::try_from(config).unwrap()
}

/// The A30 fixture, its stand-in tools and the host tree.
pub fn a30_host(root: &Path) -> (Arc<HostTree>, ToolStandIns) {
    std::fs::create_dir_all(root).unwrap();
    let host = Arc::new(HostTree::at(root));
    NamedHost::A30Pcie.build_into(&host);
    let tools = ToolStandIns::install(&host);
    (host, tools)
}

/// PhysicalGPU names of `node`.
pub async fn gpus_of(client: &Client, node: &str) -> Vec<String> {
    let list = Api::<PhysicalGPU>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter(|gpu| {
            gpu.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("gpu.deckhouse.io/node"))
                .map(String::as_str)
                == Some(node)
        })
        .filter_map(|gpu| gpu.metadata.name)
        .collect();
    names.sort();
    names
}

/// Resync times measured for one outage, by what was probed.
#[derive(Debug, Default)]
pub struct Resync {
    pub outage: &'static str,
    pub seconds: BTreeMap<&'static str, f64>,
}

impl Resync {
    pub fn row(&self) -> String {
        let cells: Vec<String> = self
            .seconds
            .iter()
            .map(|(what, s)| format!("{what} {s:.1} s"))
            .collect();
        format!("| {} | {} |", self.outage, cells.join(", "))
    }
}

pub const RESYNC_DEADLINE: Duration = Duration::from_secs(10);
