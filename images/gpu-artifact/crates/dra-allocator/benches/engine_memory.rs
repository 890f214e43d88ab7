//! `make bench`: the allocation engine's own memory at 1,000 nodes x 8 H100 with every MIG offer
//! (208,000 devices), in both slice layouts, before and after 10,000 mixed claims are allocated best
//! fit across the cluster (as gpu-dra-controller does). A global allocator counts the bytes live,
//! so the figures are the engine's heap, not a process's resident memory (that is
//! `e2e --bench controller_memory`, which this one helps to read). The baseline, from the same run,
//! is the same slices held as API objects: what a store of whole ResourceSlices would keep.
//! Devices are measured as gpu-handler publishes them, and again with the Go differential's
//! pinning attribute (one unique string per device), the workload of the throughput benchmark.
//!
//! `ENGINE_BENCH_NODES` and `ENGINE_BENCH_CLAIMS` shrink the workload for a quick run.

// The counting allocator only forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use allocator_workloads::bench_workload;
use dra_allocator::Allocator;

const INVENTORY_SEED: u64 = 2026;
const CLAIMS_SEED: u64 = 6;
const MIB: f64 = 1024.0 * 1024.0;

/// The system allocator, counting the bytes handed out and not yet given back.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call forwards to `System` with the caller's arguments unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Measured {
    devices: usize,
    slices_as_objects: usize,
    engine_with_slices: usize,
    engine_with_claims: usize,
    allocated: usize,
}

fn measure(nodes: usize, claims: usize, split_layout: bool, pinnable: bool) -> Measured {
    let inventory = bench_workload::inventory(INVENTORY_SEED, nodes, split_layout);
    let inventory = if pinnable { inventory } else { inventory.as_published() };
    let before = live();
    let copy = inventory.slices.clone();
    let slices_as_objects = live() - before;
    drop(copy);

    let before = live();
    let mut engine = Allocator::default();
    for class in &inventory.classes {
        engine.apply_class(class);
    }
    for slice in &inventory.slices {
        engine.apply_slice(slice);
    }
    let engine_with_slices = live() - before;

    let stream = bench_workload::mixed_claims(CLAIMS_SEED, claims).claims;
    let mut allocated = 0;
    for claim in &stream {
        engine.apply_claim(claim);
        if let Ok(Some(allocation)) = engine.allocate(claim, None) {
            engine.commit_claim(claim, Some(&allocation));
            allocated += 1;
        }
    }
    drop(stream);
    let devices = engine.device_count();
    let engine_with_claims = live() - before;
    drop((engine, inventory));
    Measured {
        devices,
        slices_as_objects,
        engine_with_slices,
        engine_with_claims,
        allocated,
    }
}

fn main() {
    let nodes = setting("ENGINE_BENCH_NODES", 1_000);
    let claims = setting("ENGINE_BENCH_CLAIMS", 10_000);
    println!("allocation engine memory (live heap; {nodes} nodes x 8 H100 with every MIG offer, {claims} claims)");
    println!(
        "  {:<20} {:>9} {:>26} {:>16} {:>26} {:>11} {:>10}",
        "layout, devices",
        "devices",
        "slices as objects (base)",
        "engine, slices",
        "engine, claims allocated",
        "per device",
        "vs base"
    );
    let cases = [
        ("1.34, published", false, false),
        ("1.35+, published", true, false),
        ("1.34, pinnable", false, true),
        ("1.35+, pinnable", true, true),
    ];
    for (name, split_layout, pinnable) in cases {
        let m = measure(nodes, claims, split_layout, pinnable);
        println!(
            "  {:<20} {:>9} {:>22.1} MiB {:>12.1} MiB {:>11.1} MiB ({:>5} ok) {:>9} B {:>9.1}x",
            name,
            m.devices,
            m.slices_as_objects as f64 / MIB,
            m.engine_with_slices as f64 / MIB,
            m.engine_with_claims as f64 / MIB,
            m.allocated,
            m.engine_with_claims / m.devices.max(1),
            m.slices_as_objects as f64 / m.engine_with_claims.max(1) as f64,
        );
    }
}
