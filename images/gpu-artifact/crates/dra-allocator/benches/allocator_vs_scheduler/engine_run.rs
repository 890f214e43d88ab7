//! Our engine driven the way the Go harness drives the scheduler's allocator (see bench.go in
//! tools/allocator-harness): per claim, the nodes in the same order until one fits, then the
//! allocation is committed; each claim timed from the first node tried to the commit.

use std::time::{Duration, Instant};

use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::AllocationResult;

use crate::workload::{ClaimStream, Inventory};

/// Where each claim's node search starts.
#[derive(Clone, Copy, PartialEq)]
pub enum NodeOrder {
    /// After the node the previous claim took, as the scheduler's `nextStartNodeIndex`.
    Rotating,
    /// Always at the first node: first fit across nodes.
    Fixed,
}

impl NodeOrder {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeOrder::Rotating => "rotating",
            NodeOrder::Fixed => "fixed",
        }
    }
}

/// One engine's run over a claim stream.
pub struct EngineRun {
    /// Per claim processed, in order.
    pub latencies: Vec<Duration>,
    pub wall: Duration,
    /// Per claim processed: the node it was placed on, if any.
    pub placed_on: Vec<Option<String>>,
}

impl EngineRun {
    pub fn placed(&self) -> usize {
        self.placed_on.iter().flatten().count()
    }

    /// Claims placed before the first one that fit nowhere (all of them if none failed).
    pub fn placed_before_first_failure(&self) -> usize {
        self.placed_on.iter().take_while(|n| n.is_some()).count()
    }
}

/// Our allocations, for Go to judge: (claim index, node, result).
pub type Placements = Vec<(usize, String, AllocationResult)>;

/// Runs ours over `stream`; the one-off `Allocator::new` is timed apart and returned too.
pub fn run_ours(
    inventory: &Inventory,
    stream: &ClaimStream,
    order: NodeOrder,
    until_first_failure: bool,
) -> (EngineRun, Placements, Duration) {
    let setup_started = Instant::now();
    let mut allocator = Allocator::new(&inventory.slices, &inventory.classes, &[]);
    let setup = setup_started.elapsed();
    let nodes = &inventory.nodes;
    let mut run = EngineRun {
        latencies: Vec::with_capacity(stream.claims.len()),
        wall: Duration::ZERO,
        placed_on: Vec::with_capacity(stream.claims.len()),
    };
    let mut placements = Vec::new();
    let mut cursor = 0;
    let began = Instant::now();
    for (i, claim) in stream.claims.iter().enumerate() {
        let started = Instant::now();
        let mut placed = None;
        for k in 0..nodes.len() {
            let index = (cursor + k) % nodes.len();
            let found = allocator
                .allocate(claim, Some(&nodes[index]))
                .unwrap_or_else(|e| panic!("ours failed on valid input: {e}"));
            if let Some(result) = found {
                allocator.commit(&result);
                placed = Some((index, result));
                if order == NodeOrder::Rotating {
                    cursor = (index + 1) % nodes.len();
                }
                break;
            }
        }
        run.latencies.push(started.elapsed());
        let node = placed
            .as_ref()
            .map(|(index, _)| nodes[*index].metadata.name.clone().unwrap_or_default());
        run.placed_on.push(node.clone());
        if let (Some(node), Some((_, result))) = (node, placed) {
            placements.push((i, node, result));
        } else if until_first_failure {
            break;
        }
    }
    run.wall = began.elapsed();
    (run, placements, setup)
}
