//! `make demo`: three simulated GPU nodes on the test bed's real control plane, an A30 node (MIG),
//! an 8 x H100 node (whole cards and VFIO) and an A30 node given to MPS sharing, each with its
//! fixture host, mock libnvidia-ml, gpu-node-agent, gpu-handler and the kubelet simulator; gpu-controller turns DriverReady True from validator Pods the simulated
//! kubelets run. Then the examples of `docs/examples` are applied and the walkthrough printed. It
//! keeps running (the Nodes' heartbeats, the components) until `make demo-down` stops it.
//!
//! It reuses the e2e suite's node harness, so the demo runs exactly what the tests prove.

mod class_table;
#[path = "../../tests/handler_node/mod.rs"]
mod handler_node;
#[path = "../../tests/plugin_node/mod.rs"]
mod plugin_node;
#[path = "../../tests/support/mod.rs"]
mod support;
mod walkthrough;

use host_fixtures::{KernelEmulator, NamedHost, ToolStandIns};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams};
use plugin_node::PluginNode;
use serde_json::json;
use testbed::{ComponentProcess, TestNamespace};

#[tokio::main]
async fn main() {
    let ns = TestNamespace::create("demo").await.unwrap();
    println!(
        "== gpu module demo on {}",
        std::env::var("GPU_TESTBED_KUBECONFIG").unwrap_or_default()
    );
    let a30 = handler_node::setup("demo-a30", NamedHost::A30Pcie).await;
    let h100 = handler_node::setup("demo-h100", NamedHost::H100SxmX8).await;
    let shared = handler_node::setup("demo-a30-shared", NamedHost::A30Pcie).await;
    let controller = start_gpu_controller(&ns).await;
    for node in [&a30, &h100, &shared] {
        let validator = support::components::validator_pod(node.node.name());
        support::create(&ns.api::<Pod>(), &validator).await;
    }
    // A node the admin gives to sharing: MPS shares of its card, no MIG.
    label_node(&ns, shared.node.name(), "gpu.deckhouse.io/allow-mps", "true").await;
    label_node(&ns, shared.node.name(), "gpu.deckhouse.io/allow-mig", "false").await;
    let tools = ToolStandIns::install(&shared.host);
    let tool_env = [
        ("NVIDIA_SMI", tools.nvidia_smi().display().to_string()),
        ("NVIDIA_MPS_CONTROL", tools.mps_control().display().to_string()),
    ];
    let a30 = PluginNode::launch(a30, &[]).await;
    let h100 = PluginNode::launch(h100, &[]).await;
    let shared = PluginNode::launch(shared, &tool_env).await;
    let nodes = [&a30, &h100, &shared];
    walkthrough::inventory(&ns, &nodes).await;
    walkthrough::slices(&ns, &nodes).await;

    // The admin's classes first: the scheduler does not look again at a Pod whose extended resource had
    // no DeviceClass when it first tried it. VFIO goes to the H100 node, whose kernel side of binding a
    // card to vfio-pci is emulated; shares go to the sharing node. They are applied after the MIG and
    // whole-card Pods run.
    let _kernel = KernelEmulator::start_with_uevents(h100.s.host.clone(), h100.s.ws.socket());
    let classes = |file: &str| file.starts_with("gpuclass") || file.starts_with("deviceclass");
    let later = |file: &str| file == "shared-and-vfio-pods.yaml";
    let applied = walkthrough::apply_examples(&ns, classes).await;
    println!("\n== applied docs/examples: {}", applied.join(", "));
    walkthrough::gpu_classes(&ns, &applied).await;
    let applied = walkthrough::apply_examples(&ns, |file| !classes(file) && !later(file)).await;
    println!(
        "\n== applied docs/examples into namespace {}: {}",
        ns.name(),
        applied.join(", ")
    );
    for pod in ["cuda-job-1", "cuda-job-2"] {
        a30.wait_prepared_in(ns.name(), pod).await;
    }
    h100.wait_prepared_in(ns.name(), "h100-job").await;
    let applied = walkthrough::apply_examples(&ns, later).await;
    println!("\n== applied {}", applied.join(", "));
    for pod in ["mps-worker-1", "mps-worker-2"] {
        shared.wait_prepared_in(ns.name(), pod).await;
    }
    h100.wait_prepared_in(ns.name(), "vm-launcher").await;
    let _keep_tools = tools;
    walkthrough::claims(&ns, &nodes).await;
    walkthrough::cdi_files(&nodes);
    walkthrough::mig_instances(&nodes);
    walkthrough::inventory(&ns, &nodes).await;
    walkthrough::slices(&ns, &nodes).await;
    class_table::wait_allocations_counted(&ns.client()).await;
    walkthrough::gpu_classes(&ns, &[]).await;
    println!("\n== DEMO READY: the cluster stays up; `make demo-down` stops it.");
    println!("   logs of every component: {}", a30.s.ws.logs().display());

    let _keep = (controller, ns);
    tokio::signal::ctrl_c().await.ok();
    std::future::pending::<()>().await;
}

/// gpu-controller under its own RBAC, watching the demo namespace's validator Pods and GPUClasses.
async fn start_gpu_controller(ns: &TestNamespace) -> ComponentProcess {
    let dir = std::env::temp_dir().join(format!("{}-controller", ns.name()));
    std::fs::create_dir_all(&dir).unwrap();
    support::components::start_controller(ns, &dir, "Info", false).await.0
}

/// Sets one label on a Node, as an admin would with `kubectl label`.
async fn label_node(ns: &TestNamespace, node: &str, key: &str, value: &str) {
    let patch = json!({"metadata": {"labels": {key: value}}});
    Api::<Node>::all(ns.client())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}
