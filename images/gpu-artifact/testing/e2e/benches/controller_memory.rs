//! `make bench`: gpu-dra-controller's memory at scale, as a real process under its RBAC against the
//! real API server: 1,000 nodes x 8 H100 with every MIG offer (the slice layout of the server's
//! release, devices as gpu-handler publishes them) and 10,000 mixed claims, the workload of the
//! allocator benchmark, each waited for by a Pod with the allocation gate (the controller allocates
//! only claims a gated Pod waits for), which the controller allocates. The Pods tolerate every
//! taint: the bench's Nodes have no kubelet, and kube-controller-manager taints them unreachable. Its resident memory when every claim it could place is allocated, and its
//! peak, are printed beside the baseline from the same run: the same process on the same cluster
//! before any GPU object existed. The budget is 64 MiB (issue 16).
//!
//! Then, on the loaded cluster, what a user feels: claims created one at a time to their allocation
//! written, beside one plain status write of the same claim (`user_latency`).
//!
//! `CONTROLLER_BENCH_NODES`, `CONTROLLER_BENCH_CLAIMS` and `CONTROLLER_BENCH_LATENCY_CLAIMS` shrink
//! the workload for a quick run.

#[path = "../tests/support/mod.rs"]
mod support;
#[path = "controller_memory/user_latency.rs"]
mod user_latency;

use std::time::{Duration, Instant};

use allocator_workloads::bench_workload::{self, Inventory};
use claim_allocation::selection::SCHEDULING_GATE;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use support::components::AgentWorkspace;
use support::dra_controller_run::start_dra_controller;
use testbed::{ComponentProcess, TestNamespace};

const BUDGET_KIB: u64 = 64 * 1024;
const INVENTORY_SEED: u64 = 2026;
const CLAIMS_SEED: u64 = 6;
/// Objects written to the API server at once.
const WRITERS: usize = 8;
/// The controller is done when no claim was allocated for this long.
const QUIET: Duration = Duration::from_secs(30);

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Creates `objects`, `WRITERS` at a time; an object left by an earlier run is kept.
async fn create_all<K>(api: &Api<K>, objects: Vec<K>)
where
    K: Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    stream::iter(objects)
        .map(|object| async move {
            match api.create(&PostParams::default(), &object).await {
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                other => other.map(|_| ()),
            }
        })
        .buffer_unordered(WRITERS)
        .try_collect::<Vec<()>>()
        .await
        .expect("the workload is stored");
}

async fn load_inventory(client: &Client, inventory: &Inventory) {
    create_all(&Api::<DeviceClass>::all(client.clone()), inventory.classes.clone()).await;
    create_all(&Api::<Node>::all(client.clone()), inventory.nodes.clone()).await;
    create_all(&Api::<ResourceSlice>::all(client.clone()), inventory.slices.clone()).await;
}

async fn remove_inventory(client: &Client, inventory: &Inventory) {
    let each = DeleteParams::default();
    for slice in &inventory.slices {
        let _ = Api::<ResourceSlice>::all(client.clone())
            .delete(slice.meta().name.as_deref().unwrap_or_default(), &each)
            .await;
    }
    for node in &inventory.nodes {
        let _ = Api::<Node>::all(client.clone())
            .delete(node.meta().name.as_deref().unwrap_or_default(), &each)
            .await;
    }
}

async fn allocated(claims: &Api<ResourceClaim>) -> usize {
    let list = claims.list(&ListParams::default()).await.expect("claims listed");
    list.items
        .iter()
        .filter(|c| c.status.as_ref().is_some_and(|s| s.allocation.is_some()))
        .count()
}

/// Waits until every claim is allocated or none was for `QUIET`; returns the count and the time.
async fn until_settled(claims: &Api<ResourceClaim>, total: usize, controller: &ComponentProcess) -> (usize, Duration) {
    let start = Instant::now();
    let (mut count, mut last_change) = (0, Instant::now());
    loop {
        let now = allocated(claims).await;
        if now != count {
            (count, last_change) = (now, Instant::now());
        }
        if count == total || last_change.elapsed() > QUIET {
            return (count, last_change - start);
        }
        assert!(
            start.elapsed() < Duration::from_secs(1800),
            "still allocating after 30 min ({count}/{total})\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// A Pod with the allocation gate, on any node, waiting for the claim `claim`.
fn gated_pod(claim: &str) -> Pod {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": claim},
        "spec": {"containers": [{"name": "main", "image": "registry.invalid/testbed/pause:1",
                                 "resources": {"claims": [{"name": "gpu"}]}}],
                 "tolerations": [{"operator": "Exists"}],
                 "schedulingGates": [{"name": SCHEDULING_GATE}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]}}))
    .expect("a valid Pod")
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let nodes = setting("CONTROLLER_BENCH_NODES", 1_000);
    let total = setting("CONTROLLER_BENCH_CLAIMS", 10_000);
    let ns = TestNamespace::create("bench-dra-controller").await.unwrap();
    let client = ns.client();
    let minor = ns.cluster().server_minor().await.unwrap();
    let split_layout = minor >= 35;

    let ws = AgentWorkspace::new();
    let (controller, _) = start_dra_controller(&ns, &ws).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle = controller.rss_kib().expect("controller RSS");
    let idle_anon = controller.rss_anon_kib().expect("controller anonymous RSS");

    eprintln!("controller bench: storing {nodes} nodes x 8 H100 (split layout: {split_layout}) and {total} claims");
    let inventory = bench_workload::inventory(INVENTORY_SEED, nodes, split_layout).as_published();
    let devices: usize = inventory
        .slices
        .iter()
        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
        .sum();
    let stored = Instant::now();
    load_inventory(&client, &inventory).await;
    let mut claims = bench_workload::mixed_claims(CLAIMS_SEED, total).claims;
    for claim in &mut claims {
        claim.metadata.namespace = None;
        claim.metadata.uid = None;
    }
    let pods: Vec<Pod> = claims.iter().map(|c| gated_pod(&c.name_any())).collect();
    let api = ns.api::<ResourceClaim>();
    create_all(&api, claims).await;
    create_all(&ns.api::<Pod>(), pods).await;
    eprintln!(
        "controller bench: stored in {:?}; waiting for the allocations",
        stored.elapsed()
    );

    let (placed, took) = until_settled(&api, total, &controller).await;
    let (settled, settled_anon, peak) = (
        controller.rss_kib().expect("controller RSS"),
        controller.rss_anon_kib().expect("controller anonymous RSS"),
        controller.peak_rss_kib().expect("controller peak RSS"),
    );
    let latency_claims = setting("CONTROLLER_BENCH_LATENCY_CLAIMS", 100);
    let (ours, direct) = user_latency::measure(&ns, latency_claims, gated_pod).await;
    remove_inventory(&client, &inventory).await;

    println!(
        "gpu-dra-controller memory (Kubernetes 1.{minor}; {nodes} nodes x 8 H100, {devices} devices in {} slices, {total} claims)",
        inventory.slices.len()
    );
    println!(
        "  {:<52} {:>8.1} MiB",
        "baseline: the same process, no GPU objects",
        mib(idle)
    );
    println!(
        "  {:<52} {:>8.1} MiB  {:>5.2}x baseline  {:>5.2} of the 64 MiB budget",
        format!("{placed} claims of gated Pods allocated (last one {took:.0?} after the store)"),
        mib(settled),
        settled as f64 / idle as f64,
        settled as f64 / BUDGET_KIB as f64
    );
    println!(
        "  {:<52} {:>8.1} MiB  (baseline {:.1} MiB); the rest is mostly the binary's own pages",
        "of which anonymous (heap, stacks: RssAnon)",
        mib(settled_anon),
        mib(idle_anon)
    );
    println!(
        "  {:<52} {:>8.1} MiB  {:>5.2}x baseline  {:>5.2} of the 64 MiB budget",
        "peak (VmHWM) over the run",
        mib(peak),
        peak as f64 / idle as f64,
        peak as f64 / BUDGET_KIB as f64
    );
    println!(
        "what a user feels on the loaded cluster ({latency_claims} claims of one 1g.10gb partition, one at a time)"
    );
    for (what, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (base, with_controller) = (user_latency::at(&direct, p), user_latency::at(&ours, p));
        println!(
            "  claim created to allocation written, {what}: gpu-dra-controller {with_controller:>8.1?}, one plain status write {base:>8.1?} (baseline): {:.1}x",
            with_controller.as_secs_f64() / base.as_secs_f64()
        );
    }
    drop(controller);
}
