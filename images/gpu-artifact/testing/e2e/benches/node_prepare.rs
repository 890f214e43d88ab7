//! `make bench`: the node plugin's latency against the real API server and the real gpu-handler.
//!
//! 1. NodePrepareResources and NodeUnprepareResources through the DRA socket, for a whole A30 and
//!    for a MIG 2g.12gb device (placements 0 and 2 in turn), next to the durable writes each call
//!    must make (done by hand on the same disk, see `fsync_floor`), a bare gRPC round trip and the
//!    API GET of the claim the plugin does first. Baselines and calls are interleaved cycle by
//!    cycle, so a noisy neighbour hits both alike.
//! 2. gpu-handler's start to the 8 x H100 node's pool fully published, next to its start to
//!    `/healthz` answering, from the same starts; and its resident memory then.
//!
//! It prints numbers and ratios; it asserts correctness (every call succeeds, the pool is complete)
//! but never time.

#[path = "../tests/handler_node/mod.rs"]
mod handler_node;
#[path = "../tests/plugin_node/mod.rs"]
mod plugin_node;
#[path = "../tests/support/mod.rs"]
mod support;

#[path = "node_prepare/claims.rs"]
mod claims;
#[path = "node_prepare/dra_calls.rs"]
mod dra_calls;
#[path = "node_prepare/fsync_floor.rs"]
mod fsync_floor;
#[path = "node_prepare/publication.rs"]
mod publication;

use std::time::{Duration, Instant};

use host_fixtures::NamedHost;
use k8s_openapi::api::resource::v1::ResourceClaim;
use plugin_node::{PluginNode, kubelet_root};

use claims::allocate;
use dra_calls::DraCaller;
use fsync_floor::{FsyncFloor, PREPARE_ATOMIC_WRITES, UNPREPARE_ATOMIC_WRITES, UNPREPARE_DURABLE_REMOVALS};

/// Prepare+unprepare cycles per device kind, after `WARM_UP` unmeasured ones.
const CYCLES: usize = 100;
const WARM_UP: usize = 5;
/// Handler starts on the 8-GPU node.
const STARTS: usize = 5;
const MIG_DEVICES: [&str; 2] = ["gpu0-mig-2g12gb-0", "gpu0-mig-2g12gb-2"];

#[derive(Default)]
struct Samples(Vec<Duration>);

impl Samples {
    fn push(&mut self, sample: Duration) {
        self.0.push(sample);
    }
    fn at(&self, p: f64) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
    }
    fn p50(&self) -> Duration {
        self.at(0.5)
    }
    fn row(&self, what: &str) -> String {
        format!("{what:<44} p50 {:>9.2?}  p99 {:>9.2?}", self.p50(), self.at(0.99))
    }
    fn row_vs(&self, what: &str, base: &Samples, base_name: &str) -> String {
        let ratio = self.p50().as_secs_f64() / base.p50().as_secs_f64();
        format!("{}  {ratio:>6.1}x {base_name}", self.row(what))
    }
}

#[derive(Default)]
struct PrepareSamples {
    rpc: Samples,
    claim_get: Samples,
    floor_prepare: Samples,
    floor_unprepare: Samples,
    physical: (Samples, Samples),
    mig: (Samples, Samples),
}

#[tokio::main]
async fn main() {
    let node = PluginNode::start("bench-prepare", NamedHost::A30Pcie, &[]).await;
    let minor = node.s.ns.cluster().server_minor().await.unwrap();
    let prepare = prepare_latency(&node).await;
    drop(node);
    let (healthz, published, memory) = start_to_published().await;

    println!("node plugin benchmark (Kubernetes 1.{minor}; {CYCLES} cycles per device kind, {STARTS} handler starts)");
    println!("  baselines, interleaved with the cycles:");
    println!("    {}", prepare.rpc.row("gRPC round trip (empty NodePrepare)"));
    println!("    {}", prepare.claim_get.row("API GET of the claim"));
    let prepare_floor = format!("fsync floor of a prepare ({PREPARE_ATOMIC_WRITES} atomic writes)");
    println!("    {}", prepare.floor_prepare.row(&prepare_floor));
    let unprepare_floor =
        format!("fsync floor of an unprepare ({UNPREPARE_ATOMIC_WRITES}+{UNPREPARE_DURABLE_REMOVALS} rm)");
    println!("    {}", prepare.floor_unprepare.row(&unprepare_floor));
    println!("  through the DRA socket (ratio: p50 / fsync floor p50):");
    for (kind, (prep, unprep)) in [("Physical gpu0", &prepare.physical), ("MIG 2g.12gb", &prepare.mig)] {
        let what = format!("NodePrepareResources {kind}");
        println!("    {}", prep.row_vs(&what, &prepare.floor_prepare, "floor"));
        let what = format!("NodeUnprepareResources {kind}");
        println!("    {}", unprep.row_vs(&what, &prepare.floor_unprepare, "floor"));
    }
    println!("  gpu-handler start on 8 x H100 SXM5, DriverReady=True (max instead of p99):");
    let max = |s: &Samples| s.at(1.0);
    println!(
        "    {:<44} p50 {:>9.2?}  max {:>9.2?}",
        "start -> /healthz (baseline)",
        healthz.p50(),
        max(&healthz)
    );
    println!(
        "    {:<44} p50 {:>9.2?}  max {:>9.2?}  {:>6.1}x healthz",
        "start -> pool fully published",
        published.p50(),
        max(&published),
        published.p50().as_secs_f64() / healthz.p50().as_secs_f64()
    );
    println!(
        "    {:<44} RSS {:>6.1} MiB  peak {:>6.1} MiB",
        "gpu-handler memory, pool published",
        memory.rss_kib as f64 / 1024.0,
        memory.peak_kib as f64 / 1024.0
    );
}

/// Part 1: prepare and unprepare cycles on the A30 node with their baselines.
async fn prepare_latency(node: &PluginNode) -> PrepareSamples {
    for device in MIG_DEVICES {
        node.wait_offered(device).await;
    }
    let ns = &node.s.ns;
    let name = node.s.node.name();
    let physical = allocate(ns, name, "whole", "gpu0").await;
    let migs = [
        allocate(ns, name, "mig-0", MIG_DEVICES[0]).await,
        allocate(ns, name, "mig-2", MIG_DEVICES[1]).await,
    ];
    let plugin_dir = kubelet_root(&node.s).join("plugins/gpu.deckhouse.io");
    let mut dra = DraCaller::connect(&plugin_dir.join("dra.sock"), &node.handler).await;

    // Warm up every path once, and learn the sizes the floor writes.
    let (_, cdi_ids) = dra.prepare(&physical).await;
    assert_eq!(cdi_ids, [format!("gpu.deckhouse.io/claim={}-gpu0", physical.uid)]);
    let checkpoint_size = std::fs::metadata(plugin_dir.join("checkpoint.json")).unwrap().len();
    let cdi_size = std::fs::metadata(node.cdi_file(&physical.uid)).unwrap().len();
    dra.unprepare(&physical).await;
    for i in 0..WARM_UP {
        dra.prepare(&physical).await;
        dra.unprepare(&physical).await;
        dra.prepare(&migs[i % 2]).await;
        dra.unprepare(&migs[i % 2]).await;
    }

    let floor = FsyncFloor::new(
        &plugin_dir,
        &node.host().join("var/run/cdi"),
        checkpoint_size as usize,
        cdi_size as usize,
    );
    let claims = ns.api::<ResourceClaim>();
    let mut samples = PrepareSamples::default();
    for i in 0..CYCLES {
        samples.floor_prepare.push(floor.prepare());
        samples.floor_unprepare.push(floor.unprepare());
        samples.rpc.push(dra.empty_round_trip().await);
        let start = Instant::now();
        claims.get(&physical.name).await.unwrap();
        samples.claim_get.push(start.elapsed());

        samples.physical.0.push(dra.prepare(&physical).await.0);
        samples.physical.1.push(dra.unprepare(&physical).await);
        let mig = &migs[i % 2];
        let (took, cdi_ids) = dra.prepare(mig).await;
        assert_eq!(cdi_ids, [format!("gpu.deckhouse.io/claim={}-{}", mig.uid, mig.device)]);
        samples.mig.0.push(took);
        samples.mig.1.push(dra.unprepare(mig).await);
    }
    floor.clean_up();
    assert!(node.checkpointed_claims().is_empty(), "{:?}", node.checkpoint());
    assert!(
        node.mig_instances().is_empty() && !node.mig_enabled(),
        "MIG is off after the last unprepare"
    );
    samples
}

/// Part 2: handler starts on the 8-GPU node until its pool is published; (healthz, published).
async fn start_to_published() -> (Samples, Samples, HandlerMemory) {
    let s = handler_node::setup("bench-publish", NamedHost::H100SxmX8).await;
    s.set_driver_ready("True").await;
    let mock = s.install_mock("nvml");
    let cards = s.names.len();
    let (mut healthz, mut published) = (Samples::default(), Samples::default());
    let mut memory = HandlerMemory::default();
    for _ in 0..STARTS {
        let (times, handler) = publication::start_and_time(&s, &mock.library_path(), cards).await;
        healthz.push(times.healthz);
        published.push(times.published);
        memory.rss_kib = memory.rss_kib.max(handler.rss_kib().unwrap_or(0));
        memory.peak_kib = memory.peak_kib.max(handler.peak_rss_kib().unwrap_or(0));
        publication::stop_and_unpublish(&s, handler).await;
    }
    (healthz, published, memory)
}

/// gpu-handler's resident memory once the 8 x H100 pool is published, the largest over the starts.
#[derive(Default)]
struct HandlerMemory {
    rss_kib: u64,
    peak_kib: u64,
}
