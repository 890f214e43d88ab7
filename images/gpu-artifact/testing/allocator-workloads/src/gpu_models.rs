//! The MIG tables of the GPUs in the workloads: per profile the memory slices one instance takes,
//! its memory, and every placement start (from `nvidia-smi mig -lgipp`, as in the mock-nvml
//! machines). The H100's media-extension profile (`1g.10gb+me`, which takes the card's media
//! engines) is modelled with one `media-extensions` counter per card that it consumes whole, so
//! one such instance fits a card at a time; the A100s' are left out. Of the profiles taking the
//! same number of memory slices, the one listed first is the one a small inventory offers (see
//! `NodeShape`).

/// One MIG profile: name, memory slices per instance, memory in Gi, placement starts.
pub struct MigProfile {
    pub name: &'static str,
    pub memory_slices: u32,
    pub memory_gi: u64,
    pub starts: &'static [u32],
    /// Takes the card's media engines (`+me`).
    pub media: bool,
}

/// A GPU model: the value of its `device` attribute, its memory and its MIG table.
pub struct GpuModel {
    pub name: &'static str,
    pub memory_gi: u64,
    pub memory_slices: u32,
    pub profiles: &'static [MigProfile],
}

const fn profile(name: &'static str, memory_slices: u32, memory_gi: u64, starts: &'static [u32]) -> MigProfile {
    MigProfile {
        name,
        memory_slices,
        memory_gi,
        starts,
        media: false,
    }
}

const fn media(name: &'static str, memory_slices: u32, memory_gi: u64, starts: &'static [u32]) -> MigProfile {
    MigProfile {
        media: true,
        ..profile(name, memory_slices, memory_gi, starts)
    }
}

const SEVEN: &[u32] = &[0, 1, 2, 3, 4, 5, 6];
const EVEN: &[u32] = &[0, 2, 4, 6];
const PAIRS: &[u32] = &[0, 2, 4];
const HALVES: &[u32] = &[0, 4];
const WHOLE: &[u32] = &[0];

pub const A30: GpuModel = GpuModel {
    name: "a30-24gb",
    memory_gi: 24,
    memory_slices: 4,
    profiles: &[
        profile("1g.6gb", 1, 6, &[0, 1, 2, 3]),
        profile("2g.12gb", 2, 12, &[0, 2]),
        profile("4g.24gb", 4, 24, WHOLE),
    ],
};

pub const A100_SXM4_40GB: GpuModel = GpuModel {
    name: "a100-sxm4-40gb",
    memory_gi: 40,
    memory_slices: 8,
    profiles: &[
        profile("1g.5gb", 1, 5, SEVEN),
        profile("2g.10gb", 2, 10, PAIRS),
        profile("1g.10gb", 2, 10, EVEN),
        profile("3g.20gb", 4, 20, HALVES),
        profile("4g.20gb", 4, 20, WHOLE),
        profile("7g.40gb", 8, 40, WHOLE),
    ],
};

pub const A100_SXM4_80GB: GpuModel = GpuModel {
    name: "a100-sxm4-80gb",
    memory_gi: 80,
    memory_slices: 8,
    profiles: &[
        profile("1g.10gb", 1, 10, SEVEN),
        profile("2g.20gb", 2, 20, PAIRS),
        profile("1g.20gb", 2, 20, EVEN),
        profile("3g.40gb", 4, 40, HALVES),
        profile("4g.40gb", 4, 40, WHOLE),
        profile("7g.80gb", 8, 80, WHOLE),
    ],
};

pub const H100_SXM5_80GB: GpuModel = GpuModel {
    name: "h100-sxm5-80gb",
    memory_gi: 80,
    memory_slices: 8,
    profiles: &[
        profile("1g.10gb", 1, 10, SEVEN),
        media("1g.10gb+me", 1, 10, SEVEN),
        profile("2g.20gb", 2, 20, PAIRS),
        profile("1g.20gb", 2, 20, EVEN),
        profile("3g.40gb", 4, 40, HALVES),
        profile("4g.40gb", 4, 40, WHOLE),
        profile("7g.80gb", 8, 80, WHOLE),
    ],
};
