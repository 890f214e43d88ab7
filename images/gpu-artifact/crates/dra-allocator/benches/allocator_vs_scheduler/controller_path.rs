//! Our engine the way gpu-dra-controller drives it: kept up to date from watch events, each new
//! claim allocated best fit across the whole cluster (no node given) and committed. Measured:
//! per-claim latency of that path, and what one event costs the engine (a node republishing its
//! slices, an allocated claim arriving and going), against the one-off build from scratch.

use std::time::{Duration, Instant};

use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::engine_run::EngineRun;
use crate::workload::{ClaimStream, Inventory};

/// Costs of single events on a loaded engine, per event.
pub struct EventCosts {
    pub build: Duration,
    pub republish_node: Vec<Duration>,
    pub claim_arrives: Vec<Duration>,
    pub claim_goes: Vec<Duration>,
}

/// Best fit across the cluster for each claim of `stream`, committed; then event costs.
pub fn run(inventory: &Inventory, stream: &ClaimStream) -> (EngineRun, EventCosts) {
    let started = Instant::now();
    let mut allocator = Allocator::new(&inventory.slices, &inventory.classes, &[]);
    let build = started.elapsed();
    let mut run = EngineRun {
        latencies: Vec::with_capacity(stream.claims.len()),
        wall: Duration::ZERO,
        placed_on: Vec::with_capacity(stream.claims.len()),
    };
    let mut allocated: Vec<ResourceClaim> = Vec::new();
    let began = Instant::now();
    for claim in &stream.claims {
        let started = Instant::now();
        let result = allocator
            .allocate(claim, None)
            .unwrap_or_else(|e| panic!("ours failed on valid input: {e}"));
        if let Some(result) = &result {
            allocator.commit_claim(claim, Some(result));
        }
        run.latencies.push(started.elapsed());
        run.placed_on.push(
            result
                .as_ref()
                .map(|r| allocator_workloads::node_of(r).unwrap_or_default()),
        );
        if let Some(result) = result {
            let mut done = claim.clone();
            done.status.get_or_insert_with(Default::default).allocation = Some(result);
            allocated.push(done);
        }
    }
    run.wall = began.elapsed();
    let mut costs = EventCosts {
        build,
        republish_node: Vec::new(),
        claim_arrives: Vec::new(),
        claim_goes: Vec::new(),
    };
    // A node republishes: every slice of its pool again, a generation up (as after a prepare).
    let per_node = inventory.slices.len() / inventory.nodes.len().max(1);
    for node in (0..inventory.nodes.len()).step_by((inventory.nodes.len() / 100).max(1)) {
        let started = Instant::now();
        for slice in &inventory.slices[node * per_node..(node + 1) * per_node] {
            let mut next = slice.clone();
            next.spec.pool.generation += 1;
            allocator.apply_slice(&next);
        }
        costs.republish_node.push(started.elapsed());
    }
    for claim in allocated.iter().step_by((allocated.len() / 1000).max(1)) {
        let id = dra_allocator::claim_id(claim);
        let started = Instant::now();
        allocator.remove_claim(&id);
        costs.claim_goes.push(started.elapsed());
        let started = Instant::now();
        allocator.apply_claim(claim);
        costs.claim_arrives.push(started.elapsed());
    }
    (run, costs)
}
