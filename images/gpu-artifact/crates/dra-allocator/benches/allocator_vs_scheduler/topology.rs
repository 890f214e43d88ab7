//! Topology: claims of 2 and 4 whole H100s on nodes of eight, as a two-socket HGX board publishes
//! them (cards 0-3 on NUMA node 0 under root `pci0000:00`, 4-7 on NUMA node 1 under `pci0000:80`,
//! all eight in one NVLink domain; MIG offers off, which changes no whole-card choice), arriving
//! and leaving so that about 70% of the cards stay held. The same events go to ours, as
//! gpu-dra-controller allocates (best fit across the cluster, no node given), and to the
//! scheduler's allocator (Go, first fit: nodes in order, the first solution on the first node that
//! fits), each over its own earlier choices. Per engine: claims placed, the share of them on one
//! NUMA node, that share among the claims whose node had a NUMA node with room for them when they
//! came, and the nodes in use, averaged over the events (packing holds when ours uses no more than
//! Go). Every allocation of ours is then judged by Go over the state ours had: all must be accepted.

use std::collections::BTreeMap;

use allocator_workloads::bench_workload::{self as workload, ClaimStream, Inventory};
use allocator_workloads::{GoHarness, Rng, device_set, node_of, pinned_claim};
use dra_allocator::{Allocator, claim_id};
use k8s_openapi::api::resource::v1::AllocationResult;
use serde_json::{Value, json};

const NODES: usize = 16;
const CLAIMS: usize = 300;
/// Claims alive at once, about 70% of 16 x 8 cards at three cards a claim.
const LIVE: usize = 30;
const CARDS_PER_NUMA_NODE: u32 = 4;

/// One engine's record of the events.
#[derive(Default)]
pub struct TopologyRun {
    pub placed: usize,
    pub one_numa_node: usize,
    /// Claims placed on a node that had a NUMA node with room for them, and of those the ones
    /// placed on one NUMA node.
    pub had_room: usize,
    pub had_room_one_numa_node: usize,
    /// Nodes holding at least one claim, summed over the events (divide by `events`).
    pub nodes_in_use: usize,
    pub events: usize,
}

impl TopologyRun {
    pub fn share(part: usize, whole: usize) -> f64 {
        100.0 * part as f64 / whole.max(1) as f64
    }

    pub fn mean_nodes_in_use(&self) -> f64 {
        self.nodes_in_use as f64 / self.events.max(1) as f64
    }
}

/// Arrivals in order; after each, the claims that leave (indices of earlier arrivals).
fn events(seed: u64) -> Vec<(usize, Vec<usize>)> {
    let mut rng = Rng::new(seed);
    let mut live: Vec<usize> = Vec::new();
    (0..CLAIMS)
        .map(|arriving| {
            live.push(arriving);
            let mut leaving = Vec::new();
            while live.len() > LIVE {
                leaving.push(live.swap_remove(rng.below(live.len() as u64) as usize));
            }
            (arriving, leaving)
        })
        .collect()
}

/// Which cards (`gpu<i>`) of which node an allocation holds.
fn cards_of(result: &AllocationResult) -> (String, Vec<u32>) {
    let results = result.devices.as_ref().and_then(|d| d.results.as_ref());
    let cards = results
        .into_iter()
        .flatten()
        .map(|r| r.device.trim_start_matches("gpu").parse().expect("a whole card"))
        .collect();
    (node_of(result).unwrap_or_default(), cards)
}

/// Follows one engine's choices: what it holds where, and the record.
#[derive(Default)]
struct Tally {
    held: BTreeMap<usize, (String, Vec<u32>)>,
    run: TopologyRun,
}

impl Tally {
    fn numa_free(&self, node: &str, numa: u32) -> u32 {
        let taken = self
            .held
            .values()
            .filter(|(n, _)| n == node)
            .flat_map(|(_, cards)| cards)
            .filter(|card| **card / CARDS_PER_NUMA_NODE == numa)
            .count() as u32;
        CARDS_PER_NUMA_NODE - taken
    }

    fn placed(&mut self, claim: usize, result: &AllocationResult) {
        let (node, cards) = cards_of(result);
        let room = (0..2).any(|numa| self.numa_free(&node, numa) >= cards.len() as u32);
        let one = cards
            .iter()
            .all(|c| c / CARDS_PER_NUMA_NODE == cards[0] / CARDS_PER_NUMA_NODE);
        self.run.placed += 1;
        self.run.one_numa_node += usize::from(one);
        self.run.had_room += usize::from(room);
        self.run.had_room_one_numa_node += usize::from(room && one);
        self.held.insert(claim, (node, cards));
    }

    fn event_done(&mut self) {
        let mut nodes: Vec<&String> = self.held.values().map(|(n, _)| n).collect();
        nodes.sort();
        nodes.dedup();
        self.run.nodes_in_use += nodes.len();
        self.run.events += 1;
    }
}

/// A claim of the stream as the harness takes it, allocated with `result`.
fn allocated(stream: &ClaimStream, claim: usize, result: &AllocationResult) -> Value {
    let mut done = stream.json[claim].clone();
    done["status"] = json!({"allocation": result});
    done
}

fn case(inventory: &Inventory, allocated: Vec<Value>, nodes: Vec<Value>, claim: Value) -> Value {
    json!({"slices": inventory.slices_json, "classes": inventory.classes_json,
        "allocated": allocated, "nodes": nodes, "claim": claim})
}

/// Runs both engines over the same events; returns (ours, Go, our allocations Go accepted).
pub fn run(go: &GoHarness) -> (TopologyRun, TopologyRun, usize) {
    let inventory = workload::inventory_with_mig(2027, NODES, true, false);
    let stream = workload::whole_card_claims(9, CLAIMS);
    let mut engine = Allocator::new(&inventory.slices, &inventory.classes, &[]);
    let (mut ours, mut theirs) = (Tally::default(), Tally::default());
    let mut ours_results: BTreeMap<usize, AllocationResult> = BTreeMap::new();
    let mut theirs_results: BTreeMap<usize, AllocationResult> = BTreeMap::new();
    let mut judged = Vec::new();
    for (arriving, leaving) in events(31) {
        let claim = &stream.claims[arriving];
        if let Some(result) = engine.allocate(claim, None).expect("valid input") {
            // Go judges it over the state ours had: our claims allocated before it.
            let state = ours_results.iter().map(|(i, r)| allocated(&stream, *i, r)).collect();
            let node = json!({"metadata": {"name": node_of(&result).unwrap_or_default()}});
            judged.push((
                result.clone(),
                case(
                    &inventory,
                    state,
                    vec![node],
                    pinned_claim(&stream.json[arriving], &result),
                ),
            ));
            engine.commit_claim(claim, Some(&result));
            ours.placed(arriving, &result);
            ours_results.insert(arriving, result);
        }
        let state = theirs_results.iter().map(|(i, r)| allocated(&stream, *i, r)).collect();
        let answer = &go.run(&[case(
            &inventory,
            state,
            inventory.nodes_json.clone(),
            stream.json[arriving].clone(),
        )])[0];
        assert!(answer.get("error").is_none(), "Go failed: {answer}");
        if let Some(result) = answer.get("allocation") {
            let result: AllocationResult = serde_json::from_value(result.clone()).expect("Go's allocation");
            theirs.placed(arriving, &result);
            theirs_results.insert(arriving, result);
        }
        for gone in leaving {
            if ours_results.remove(&gone).is_some() {
                engine.remove_claim(&claim_id(&stream.claims[gone]));
                ours.held.remove(&gone);
            }
            if theirs_results.remove(&gone).is_some() {
                theirs.held.remove(&gone);
            }
        }
        ours.event_done();
        theirs.event_done();
    }
    let answers = go.run(&judged.iter().map(|(_, case)| case.clone()).collect::<Vec<_>>());
    for ((result, _), answer) in judged.iter().zip(&answers) {
        let accepted: AllocationResult = serde_json::from_value(answer["allocation"].clone())
            .unwrap_or_else(|_| panic!("Go rejects our topology allocation {result:?}: {answer}"));
        assert_eq!(
            device_set(&accepted),
            device_set(result),
            "Go allocates our pinned claim differently"
        );
    }
    (ours.run, theirs.run, judged.len())
}
