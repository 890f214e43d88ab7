//! Workloads for the allocation engine's differential test and benchmark: a seedable random
//! source, the MIG tables of the GPUs the module serves, node inventories shaped as the gpu
//! module publishes them (both slice layouts), the DeviceClasses, and the bridge to the Go
//! allocator harness, including pinning a claim to the devices our engine chose so Go can judge
//! that choice. Test-only: nothing here ships, and nothing here may depend on the engine itself.

pub mod bench_workload;
mod go_harness;
mod gpu_models;
mod node_slices;
mod pinning;

pub use go_harness::{GoHarness, harness_binary};
pub use gpu_models::{A30, A100_SXM4_40GB, A100_SXM4_80GB, GpuModel, H100_SXM5_80GB, MigProfile};
pub use node_slices::{DRIVER, NodeShape, PIN_ATTRIBUTE, classes, node_slices};
pub use pinning::{DeviceSet, device_set, node_of, pinned_claim, unpinned};

/// SplitMix64: small, seedable, good enough to explore; the same seed gives the same workload.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
