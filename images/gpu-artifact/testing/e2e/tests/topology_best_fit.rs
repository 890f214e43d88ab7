//! Topology-aware best fit end to end, on the real control plane: a node of eight H100 SXM5 (the
//! `h100-sxm-x8` fixture, two cards per NUMA node in sysfs; the mock NVML's HGX board, every card
//! on the four NVSwitches) runs gpu-node-agent and gpu-handler, which publish each card's
//! `resource.kubernetes.io/numaNode` and `gpu.deckhouse.io/nvlinkDomain`; gpu-dra-controller then
//! allocates a claim of two whole cards, for the gated Pod that waits for it, on one NUMA node, the
//! tightest that holds it, where the scheduler's first fit would split it over two.

mod handler_node;
mod plugin_node;
mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use host_fixtures::NamedHost;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim};
use kube::{Api, ResourceExt};
use plugin_node::PluginNode;
use serde_json::json;
use support::dra_controller_run::start_dra_controller;
use support::node_objects::node_slices;
use support::*;
use testbed::{Progress, wait_until};

/// The whole cards the node publishes: device name -> (NUMA node, NVLink domain).
async fn whole_cards(node: &PluginNode) -> BTreeMap<String, (Option<i64>, Option<String>)> {
    wait_until("eight whole cards published", Duration::from_secs(60), || async {
        let slices = node_slices(&node.s.ns.client(), node.s.node.name()).await;
        let cards: BTreeMap<_, _> = slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .filter(|d| !d.name.contains("-mig-"))
            .map(|d| {
                let attributes = d.attributes.clone().unwrap_or_default();
                let numa = attributes.get("resource.kubernetes.io/numaNode").and_then(|a| a.int);
                let domain = attributes
                    .get("gpu.deckhouse.io/nvlinkDomain")
                    .and_then(|a| a.string.clone());
                (d.name.clone(), (numa, domain))
            })
            .collect();
        Ok(if cards.len() == 8 {
            Progress::Done(cards)
        } else {
            Progress::Pending(format!("{cards:?}"))
        })
    })
    .await
    .unwrap()
}

fn claim(name: &str, class: &str, count: u32) -> ResourceClaim {
    serde_json::from_value(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": class, "count": count}}]}}}),
    )
    .unwrap()
}

async fn allocated(claims: &Api<ResourceClaim>, name: &str) -> Vec<String> {
    wait_until(&format!("claim {name} allocated"), Duration::from_secs(60), || async {
        let claim = claims.get(name).await?;
        Ok(if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            Progress::Done(allocated_devices(&claim).into_iter().map(|(_, d)| d).collect())
        } else {
            Progress::Pending("unallocated".into())
        })
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cards_go_to_one_numa_node_the_tightest() {
    let node = PluginNode::start("topology", NamedHost::H100SxmX8, &[]).await;
    let ns = &node.s.ns;
    let cards = whole_cards(&node).await;
    for (i, (name, (numa, domain))) in cards.iter().enumerate() {
        assert_eq!(
            *numa,
            Some(i as i64 / 2),
            "{name}: the fixture puts two cards on each NUMA node"
        );
        assert_eq!(
            domain.as_deref(),
            Some("0000:05:00.0"),
            "{name}: all eight reach the NVSwitches"
        );
    }
    // Whole cards of this node only (the cluster is shared).
    let expression = format!(
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "Physical" && device.attributes["gpu.deckhouse.io"].physicalGPU.startsWith("{}-")"#,
        node.s.node.name()
    );
    let class = create(
        &Api::<DeviceClass>::all(ns.client()),
        &device_class(ns, "whole", &expression, None),
    )
    .await;
    let (controller, _) = start_dra_controller(ns, &node.s.ws).await;
    let claims = ns.api::<ResourceClaim>();

    // One card first: best fit takes gpu0, leaving NUMA node 0 with one free card.
    let node_name = node.s.node.name();
    create(&claims, &claim("one", &class.name_any(), 1)).await;
    create(&ns.api::<Pod>(), &gated_claim_pod("one", node_name, "one")).await;
    assert_eq!(allocated(&claims, "one").await, ["gpu0"]);
    // Two cards: the first fit (gpu1, gpu2) would span NUMA nodes 0 and 1; best fit takes the
    // tightest NUMA node that holds both.
    create(&claims, &claim("pair", &class.name_any(), 2)).await;
    create(&ns.api::<Pod>(), &gated_claim_pod("pair", node_name, "pair")).await;
    let pair = allocated(&claims, "pair").await;
    let numa: Vec<Option<i64>> = pair.iter().map(|d| cards[d].0).collect();
    assert_eq!(
        pair,
        ["gpu2", "gpu3"],
        "NUMA nodes {numa:?}\n--- gpu-dra-controller log ---\n{}",
        controller.log()
    );
}
