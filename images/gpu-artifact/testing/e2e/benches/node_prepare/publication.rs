//! From gpu-handler's process start to the node's pool fully published: every slice of the newest
//! generation present (as many as `resourceSliceCount`) and a whole-card offer for every card. The
//! baseline, from the same start, is the process answering `/healthz` (a bare start-up: runtime,
//! logging, the health server; no API or NVML work).
//!
//! The bench watches the node's slices from before the start, so the time is when an API watcher
//! (the scheduler's view) sees the pool complete, not when the bench happens to poll.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{DeleteParams, ListParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use testbed::{ComponentProcess, Progress, wait_until};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::handler_node::Setup;
use crate::support::components::start_handler_with;

const DEADLINE: Duration = Duration::from_secs(120);

/// One start: how long until `/healthz` answered and until the pool was complete.
pub struct StartTimes {
    pub healthz: Duration,
    pub published: Duration,
}

/// Starts the handler of `s` (whose slices must be gone), returns the times and the running handler.
pub async fn start_and_time(s: &Setup, library: &Path, cards: usize) -> (StartTimes, ComponentProcess) {
    let slices = Api::<ResourceSlice>::all(s.ns.client());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", s.node.name()));
    let mut events = Box::pin(watcher(slices, config));
    // The watch is established (its initial list done) before the process starts.
    while !matches!(events.next().await, Some(Ok(watcher::Event::InitDone))) {}

    let start = Instant::now();
    let (handler, port) = start_handler_with(&s.ws, s.node.name(), &s.handler_kubeconfig, library, &[]);
    let healthz = tokio::spawn(async move {
        while !healthz_answers(port).await {
            assert!(start.elapsed() < DEADLINE, "gpu-handler never answered /healthz");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        start.elapsed()
    });

    let pool = dra_offers::pool_name(s.node.name());
    let mut stored: BTreeMap<String, ResourceSlice> = BTreeMap::new();
    let published = loop {
        let event = tokio::time::timeout_at((start + DEADLINE).into(), events.next())
            .await
            .unwrap_or_else(|_| panic!("pool {pool} not complete\n--- handler log ---\n{}", handler.log()));
        match event {
            Some(Ok(watcher::Event::Apply(slice))) => {
                stored.insert(slice.name_any(), slice);
            }
            Some(Ok(watcher::Event::Delete(slice))) => {
                stored.remove(&slice.name_any());
            }
            Some(_) => continue,
            None => panic!("the slice watch ended"),
        }
        if complete_whole_cards(&stored, &pool) == Some(cards) {
            break start.elapsed();
        }
    };
    let healthz = healthz.await.unwrap();
    (StartTimes { healthz, published }, handler)
}

/// Stops `handler`, deletes the node's slices (so the next start must publish) and waits until
/// the API server has none left for the node.
pub async fn stop_and_unpublish(s: &Setup, mut handler: ComponentProcess) {
    handler.terminate(Duration::from_secs(10));
    let slices = Api::<ResourceSlice>::all(s.ns.client());
    let on_node = ListParams::default().fields(&format!("spec.nodeName={}", s.node.name()));
    slices
        .delete_collection(&DeleteParams::default(), &on_node)
        .await
        .unwrap();
    wait_until("the node's slices deleted", Duration::from_secs(30), || async {
        let left = slices.list(&on_node).await?.items.len();
        Ok(if left == 0 {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{left} left"))
        })
    })
    .await
    .unwrap();
}

/// The number of whole-card devices (`gpu<N>`) in the newest generation of `pool`, if every slice
/// of that generation is stored; None while the generation is incomplete.
fn complete_whole_cards(stored: &BTreeMap<String, ResourceSlice>, pool: &str) -> Option<usize> {
    let in_pool = || stored.values().filter(|s| s.spec.pool.name == pool);
    let generation = in_pool().map(|s| s.spec.pool.generation).max()?;
    let newest: Vec<&ResourceSlice> = in_pool().filter(|s| s.spec.pool.generation == generation).collect();
    if newest.len() as i64 != newest[0].spec.pool.resource_slice_count {
        return None;
    }
    let whole_card = |name: &str| {
        name.strip_prefix("gpu")
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    };
    Some(
        newest
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .filter(|d| whole_card(&d.name))
            .count(),
    )
}

/// Whether `GET /healthz` on `port` answers 200 (a plain HTTP/1.0 exchange: no client to warm up).
async fn healthz_answers(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)).await else {
        return false;
    };
    if stream
        .write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .is_err()
    {
        return false;
    }
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    answer.starts_with(b"HTTP/1.1 200") || answer.starts_with(b"HTTP/1.0 200")
}
