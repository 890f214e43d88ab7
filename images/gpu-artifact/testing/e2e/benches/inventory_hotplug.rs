//! `make bench`: how fast a hotplug reaches the API, how many writes the agent makes in steady state,
//! and how much memory it holds with eight GPUs. Each number comes with a baseline measured in the
//! same run: the same object written and read back directly through the API (the floor any agent
//! pays), and the agent's own memory on a host with no GPU.

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use gpu_api::PhysicalGPU;
use host_fixtures::{FixtureDevice, HostTree, NamedHost};
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use support::components::*;
use testbed::{ReadyNode, TestNamespace};

const HOTPLUGS: usize = 100;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    samples[((samples.len() as f64 - 1.0) * p).round() as usize]
}

async fn present(gpus: &Api<PhysicalGPU>, selector: &str) -> usize {
    gpus.list(&ListParams::default().labels(selector))
        .await
        .unwrap()
        .items
        .len()
}

async fn until(gpus: &Api<PhysicalGPU>, selector: &str, want: usize) -> Duration {
    let start = Instant::now();
    while present(gpus, selector).await != want {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "agent did not converge to {want}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    start.elapsed()
}

#[tokio::main]
async fn main() {
    let ns = TestNamespace::create("bench-hotplug").await.unwrap();
    install_crds(&ns.client()).await;
    let node = ReadyNode::register(&ns, "gpu", BTreeMap::new()).await.unwrap();
    let gpus = Api::<PhysicalGPU>::all(ns.client());
    let selector = format!("gpu.deckhouse.io/node={}", node.name());

    // Baseline: create the same object directly and see it listed, then delete it.
    let mut direct = vec![];
    for i in 0..HOTPLUGS {
        let name = format!("{}-direct-{i}", node.name());
        let mut object = PhysicalGPU::new(&name, Default::default());
        object.metadata.labels = Some(BTreeMap::from([(
            "gpu.deckhouse.io/node".to_owned(),
            format!("{}-direct", node.name()),
        )]));
        let start = Instant::now();
        gpus.create(&PostParams::default(), &object).await.unwrap();
        gpus.get(&name).await.unwrap();
        direct.push(start.elapsed());
        gpus.delete(&name, &DeleteParams::default()).await.unwrap();
    }

    let ws = AgentWorkspace::new();
    std::fs::create_dir_all(ws.host_root()).unwrap();
    let host = HostTree::at(&ws.host_root());
    NamedHost::A30Pcie.build_into(&host);
    let kubeconfig = kubeconfig_for(&ns, "gpu-node-agent", node_agent_rules(), ws.dir.path()).await;
    let (agent, port) = start_agent(&ws, node.name(), &kubeconfig);
    wait_ready(port, &agent).await;
    until(&gpus, &selector, 1).await;

    let mut appear = vec![];
    let mut vanish = vec![];
    for _ in 0..HOTPLUGS {
        send_uevents(&ws.socket(), &host.remove_device("0000:01:00.0"));
        vanish.push(until(&gpus, &selector, 0).await);
        send_uevents(&ws.socket(), &host.add_device(&FixtureDevice::a30_pcie("0000:01:00.0")));
        appear.push(until(&gpus, &selector, 1).await);
    }

    // Steady state: count every change to this node's PhysicalGPUs for a minute.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let window = Duration::from_secs(60);
    let mut changes = 0u64;
    let stream = watcher(gpus.clone(), watcher::Config::default().labels(&selector));
    let mut stream = Box::pin(stream);
    let deadline = tokio::time::Instant::now() + window;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, stream.next()).await {
        if let Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) = event {
            changes += 1;
        }
    }
    let writes_per_hour = changes * 3600 / window.as_secs();

    // Memory: the agent with no GPU, then with eight (DGX A100 host).
    drop(agent);
    let empty = ns_agent_rss(&ns, &kubeconfig, NamedHost::NonNvidiaGpu, "empty").await;
    let eight = ns_agent_rss(&ns, &kubeconfig, NamedHost::A100SxmX8, "x8").await;

    let (d50, d99) = (percentile(&mut direct, 0.5), percentile(&mut direct, 0.99));
    let (a50, a99) = (percentile(&mut appear, 0.5), percentile(&mut appear, 0.99));
    let (v50, v99) = (percentile(&mut vanish, 0.5), percentile(&mut vanish, 0.99));
    println!(
        "inventory benchmark ({HOTPLUGS} hotplugs, Kubernetes {})",
        ns.cluster().server_minor().await.unwrap()
    );
    println!("  baseline: direct create+get        p50 {d50:>9.2?}  p99 {d99:>9.2?}");
    println!(
        "  uevent add -> PhysicalGPU listed   p50 {a50:>9.2?}  p99 {a99:>9.2?}  ratio p50 {:.1}x",
        a50.as_secs_f64() / d50.as_secs_f64()
    );
    println!(
        "  uevent remove -> PhysicalGPU gone  p50 {v50:>9.2?}  p99 {v99:>9.2?}  ratio p50 {:.1}x",
        v50.as_secs_f64() / d50.as_secs_f64()
    );
    println!("  steady state: {changes} object changes in {window:?} = {writes_per_hour} writes/hour");
    println!(
        "  agent RSS: {eight} KiB with 8 GPUs, {empty} KiB with none (ratio {:.2}x)",
        eight as f64 / empty as f64
    );
}

async fn ns_agent_rss(ns: &TestNamespace, kubeconfig: &std::path::Path, fixture: NamedHost, suffix: &str) -> u64 {
    let node = ReadyNode::register(ns, suffix, BTreeMap::new()).await.unwrap();
    let ws = AgentWorkspace::new();
    std::fs::create_dir_all(ws.host_root()).unwrap();
    fixture.build_into(&HostTree::at(&ws.host_root()));
    let (agent, port) = start_agent(&ws, node.name(), kubeconfig);
    wait_ready(port, &agent).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    agent.rss_kib().unwrap_or(0)
}
