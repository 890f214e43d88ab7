//! The gpu-handler's ResourceSlice publisher, run in-process against the real API server of the
//! test bed with cards read through the NVIDIA backend from the mock libnvidia-ml: the largest node
//! we support (8 x H100 SXM5 80GB, the largest MIG table) is accepted in the layout of the server's
//! version; a removed card and `allow-mig=false` bump the generation and leave no stale slice; a
//! restart with the same input writes nothing.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use dra_offers::{CardOffering, DeviceCatalog, pool_name};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use support::node_objects::node_slices;
use support::publisher::RunningPublisher;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

#[path = "../../../crates/dra-offers/tests/support/mock_cards.rs"]
mod mock_cards;

use mock_cards::mock_cards;

/// Devices of one H100 SXM5: the whole card and 25 MIG placements.
const H100_OFFERS: usize = 26;

/// The fixture's cards as the handler would hand them over, indexed by sorted PCI address.
fn cards(fixture: &str, node: &str) -> Vec<CardOffering> {
    mock_cards(fixture, node, "2330", "h100-sxm5-80gb")
}

/// The stored pool once it is complete: one generation, `resourceSliceCount` slices of it, and
/// nothing else left of ours on the node.
async fn complete_pool(client: &Client, node: &str, devices: usize, after_generation: i64) -> Vec<ResourceSlice> {
    wait_until(
        &format!(
            "pool {} with {devices} devices after generation {after_generation}",
            pool_name(node)
        ),
        Duration::from_secs(60),
        || async {
            let slices = node_slices(client, node).await;
            let generations: BTreeSet<i64> = slices.iter().map(|s| s.spec.pool.generation).collect();
            let counts: BTreeSet<i64> = slices.iter().map(|s| s.spec.pool.resource_slice_count).collect();
            let stored_devices = slices.iter().flat_map(|s| s.spec.devices.iter().flatten()).count();
            let complete = generations.len() == 1
                && generations.first() > Some(&after_generation)
                && counts == BTreeSet::from([slices.len() as i64])
                && stored_devices == devices;
            Ok(if complete {
                Progress::Done(slices)
            } else {
                Progress::Pending(format!(
                    "{} slices, generations {generations:?}, counts {counts:?}, {stored_devices} devices",
                    slices.len()
                ))
            })
        },
    )
    .await
    .expect("the pool is complete")
}

/// Checks that the stored slices have the layout of the server's version, kept every counter field
/// and carry exactly the catalog's devices. Returns the (counter sets, devices) of every slice.
fn assert_layout(slices: &[ResourceSlice], minor: u32, catalog: &DeviceCatalog, node: &str) -> Vec<(usize, usize)> {
    let mut names = BTreeSet::new();
    let mut shape = Vec::new();
    for slice in slices {
        let name = slice.metadata.name.clone().unwrap();
        assert_eq!(slice.spec.pool.name, pool_name(node));
        assert_eq!(slice.spec.node_name.as_deref(), Some(node));
        let owner = &slice.metadata.owner_references.as_ref().expect("owned by the Node")[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", node));
        let sets = slice.spec.shared_counters.iter().flatten().count();
        let devices: Vec<_> = slice.spec.devices.iter().flatten().collect();
        if minor <= 34 {
            assert_eq!(sets, 1, "{name}: 1.34 keeps a card's counter set beside its devices");
        } else {
            assert!(
                sets == 0 || devices.is_empty(),
                "{name}: 1.35+ separates counters and devices"
            );
            assert!(
                sets <= 8 && devices.len() <= 64,
                "{name}: {sets} counter sets, {} devices",
                devices.len()
            );
        }
        for device in &devices {
            assert!(
                device.consumes_counters.is_some(),
                "{name}/{}: the server kept consumesCounters",
                device.name
            );
            names.insert(device.name.clone());
        }
        shape.push((sets, devices.len()));
    }
    assert_eq!(
        names,
        catalog.keys().cloned().collect::<BTreeSet<_>>(),
        "stored devices = catalog"
    );
    shape
}

async fn set_allow_mig(client: &Client, node: &str, value: &str) {
    let patch = serde_json::json!({"metadata": {"labels": {"gpu.deckhouse.io/allow-mig": value}}});
    Api::<Node>::all(client.clone())
        .patch(node, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("label the node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_h100_are_published_in_the_servers_layout_and_follow_changes() {
    let ns = TestNamespace::create("slice-publication").await.unwrap();
    let node = ReadyNode::register(&ns, "h100x8", BTreeMap::new()).await.unwrap();
    let client = ns.client();
    let minor = ns.cluster().server_minor().await.unwrap();
    let all_cards = cards("h100-sxm5-80gb-x8.yaml", node.name());
    let mut publisher = RunningPublisher::start(client.clone(), node.name(), all_cards.clone());

    // (1) 8 cards x 26 offers, accepted in the layout of this server.
    let catalog = publisher.published(8 * H100_OFFERS).await;
    let slices = complete_pool(&client, node.name(), 8 * H100_OFFERS, 0).await;
    let shape = assert_layout(&slices, minor, &catalog, node.name());
    let expected: Vec<(usize, usize)> = if minor <= 34 {
        vec![(1, H100_OFFERS); 8]
    } else {
        vec![(8, 0), (0, 64), (0, 64), (0, 64), (0, 16)]
    };
    assert_eq!(shape, expected);
    let first = slices[0].spec.pool.generation;

    // (2a) A card leaves: a new generation without it, and the slice it needed is gone.
    publisher.cards.send_replace(all_cards[..7].to_vec());
    let catalog = publisher.published(7 * H100_OFFERS).await;
    let slices = complete_pool(&client, node.name(), 7 * H100_OFFERS, first).await;
    let shape = assert_layout(&slices, minor, &catalog, node.name());
    let expected: Vec<(usize, usize)> = if minor <= 34 {
        vec![(1, H100_OFFERS); 7]
    } else {
        vec![(7, 0), (0, 64), (0, 64), (0, 54)]
    };
    assert_eq!(shape, expected);
    assert!(!catalog.keys().any(|name| name.starts_with("gpu7")));
    let second = slices[0].spec.pool.generation;
    assert_eq!(second, first + 1);

    // (2b) allow-mig=false on the Node: whole cards only, still guarded by their counters.
    set_allow_mig(&client, node.name(), "false").await;
    let catalog = publisher.published(7).await;
    let slices = complete_pool(&client, node.name(), 7, second).await;
    let shape = assert_layout(&slices, minor, &catalog, node.name());
    let expected: Vec<(usize, usize)> = if minor <= 34 {
        vec![(1, 1); 7]
    } else {
        vec![(7, 0), (0, 7)]
    };
    assert_eq!(shape, expected);
    assert_eq!(slices[0].spec.pool.generation, second + 1);
    assert!(catalog.keys().all(|name| !name.contains("-mig-")));

    // MIG comes back when the label allows it again.
    set_allow_mig(&client, node.name(), "true").await;
    publisher.published(7 * H100_OFFERS).await;
    publisher.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_the_same_cards_writes_nothing() {
    let ns = TestNamespace::create("slice-publication-restart").await.unwrap();
    let node = ReadyNode::register(&ns, "h100x8", BTreeMap::new()).await.unwrap();
    let client = ns.client();
    let input = cards("h100-sxm5-80gb-x8.yaml", node.name());

    let mut first = RunningPublisher::start(client.clone(), node.name(), input.clone());
    first.published(8 * H100_OFFERS).await;
    assert!(first.metrics.writes() > 0, "the first run wrote the pool");
    first.stop().await;
    let versions = |slices: &[ResourceSlice]| -> Vec<(Option<String>, Option<String>, i64)> {
        slices
            .iter()
            .map(|s| {
                (
                    s.metadata.name.clone(),
                    s.metadata.resource_version.clone(),
                    s.spec.pool.generation,
                )
            })
            .collect()
    };
    let before = versions(&node_slices(&client, node.name()).await);

    let mut second = RunningPublisher::start(client.clone(), node.name(), input);
    let catalog = second.published(8 * H100_OFFERS).await;
    assert_eq!(
        second.metrics.writes(),
        0,
        "the restarted publisher adopted the stored pool"
    );
    assert_eq!(catalog.len(), 8 * H100_OFFERS);
    second.stop().await;
    assert_eq!(
        versions(&node_slices(&client, node.name()).await),
        before,
        "nothing was written"
    );
}
