//! MIG rules as the driver enforces them: where a GPU instance may go, what
//! it may share with others, how compute instances split it, and what may
//! be destroyed. Pure functions of the state, returning NVML codes.

use nvml_wrapper_sys::bindings::nvmlReturn_t;

use crate::machine::{Card, GpuInstanceProfileSpec, MigSpec};
use crate::rc;
use crate::state::{ComputeInstanceState, GpuInstanceState, GpuState, Placement};

pub fn mig_spec(card: &Card) -> Result<&MigSpec, nvmlReturn_t> {
    card.model.mig.as_ref().ok_or(rc::NOT_SUPPORTED)
}

/// Creates a GPU instance of `profile_id`, at `placement` or (when `None`)
/// at the highest free placement, which is what the driver picked in the
/// transcripts of mig-profiles.md section 3.5 for a first instance.
pub fn create_gpu_instance(
    card: &Card,
    gpu: &mut GpuState,
    profile_id: u32,
    placement: Option<Placement>,
    serial: u64,
) -> Result<GpuInstanceState, nvmlReturn_t> {
    let mig = mig_spec(card)?;
    if !gpu.mig_current {
        return Err(rc::NOT_SUPPORTED);
    }
    let profile = mig.profile_by_id(profile_id).ok_or(rc::INVALID_ARGUMENT)?;
    let existing = gpu
        .gpu_instances
        .iter()
        .filter(|gi| gi.profile_id == profile_id)
        .count();
    if existing >= profile.max_instances as usize {
        return Err(rc::INSUFFICIENT_RESOURCES);
    }
    if !media_engines_fit(mig, gpu, profile) {
        return Err(rc::INSUFFICIENT_RESOURCES);
    }
    let is_free = |p: &Placement| !gpu.gpu_instances.iter().any(|gi| gi.placement.overlaps(p));
    let placement = match placement {
        // An invalid placement is refused like an occupied one: the driver
        // cannot create the instance there.
        Some(p) if !possible_placements(profile).contains(&p) => return Err(rc::INSUFFICIENT_RESOURCES),
        Some(p) if !is_free(&p) => return Err(rc::INSUFFICIENT_RESOURCES),
        Some(p) => p,
        None => possible_placements(profile)
            .into_iter()
            .rev()
            .find(is_free)
            .ok_or(rc::INSUFFICIENT_RESOURCES)?,
    };
    let id = lowest_free_id(1, gpu.gpu_instances.iter().map(|gi| gi.id));
    Ok(GpuInstanceState {
        serial,
        id,
        profile_id,
        placement,
        compute_instances: Vec::new(),
    })
}

pub fn possible_placements(profile: &GpuInstanceProfileSpec) -> Vec<Placement> {
    profile
        .placements
        .starts
        .iter()
        .map(|&start| Placement {
            start,
            size: profile.placements.size,
        })
        .collect()
}

/// How many more instances of `profile` fit next to the existing ones
/// (greedy over the placements, which is exact for their aligned layout).
pub fn remaining_capacity(card: &Card, gpu: &GpuState, profile: &GpuInstanceProfileSpec) -> u32 {
    let mut trial = gpu.clone();
    let mut count = 0;
    while let Ok(gi) = create_gpu_instance(card, &mut trial, profile.id, None, 0) {
        trial.gpu_instances.push(gi);
        count += 1;
    }
    count
}

/// Decoders, encoders, JPEG and OFA units are a card-wide pool (the `+me`
/// profiles take the only OFA): instances may not claim more than the full
/// card has.
fn media_engines_fit(mig: &MigSpec, gpu: &GpuState, profile: &GpuInstanceProfileSpec) -> bool {
    let Some(full) = mig.full_profile() else { return true };
    let mut used = [profile.decoders, profile.encoders, profile.jpeg, profile.ofa];
    for gi in &gpu.gpu_instances {
        if let Some(p) = mig.profile_by_id(gi.profile_id) {
            used[0] += p.decoders;
            used[1] += p.encoders;
            used[2] += p.jpeg;
            used[3] += p.ofa;
        }
    }
    let budget = [full.decoders, full.encoders, full.jpeg, full.ofa];
    used.iter().zip(budget).all(|(u, b)| *u <= b)
}

/// A GPU instance may go only when nothing runs in it and its compute
/// instances are gone (NVML: `NVML_ERROR_IN_USE`).
pub fn check_gpu_instance_destroyable(gpu: &GpuState, gi: &GpuInstanceState) -> Result<(), nvmlReturn_t> {
    let busy = gpu.processes.iter().any(|p| p.gpu_instance_id == Some(gi.id));
    if busy || !gi.compute_instances.is_empty() {
        return Err(rc::IN_USE);
    }
    Ok(())
}

pub fn check_compute_instance_destroyable(
    gpu: &GpuState,
    gi: &GpuInstanceState,
    ci: &ComputeInstanceState,
) -> Result<(), nvmlReturn_t> {
    let busy = gpu
        .processes
        .iter()
        .any(|p| p.gpu_instance_id == Some(gi.id) && p.compute_instance_id == Some(ci.id));
    if busy { Err(rc::IN_USE) } else { Ok(()) }
}

/// `NVML_COMPUTE_INSTANCE_PROFILE_*` index for a compute instance of `slices`.
pub fn compute_profile_index(slices: u32) -> Option<u32> {
    match slices {
        1 => Some(0),
        2 => Some(1),
        3 => Some(2),
        4 => Some(3),
        7 => Some(4),
        8 => Some(5),
        6 => Some(6),
        _ => None,
    }
}

/// Compute-instance sizes a GPU instance of `gi_slices` offers: 1 and 2
/// slices, the whole instance, and on a 7-slice instance also 3 and 4
/// (the per-profile CI lists of mig-profiles.md section 5.2; real `-lcip`
/// on a 3g.20gb shows 1c, 2c and 3g).
pub fn compute_slices_offered(gi_slices: u32) -> Vec<u32> {
    let mut sizes: Vec<u32> = [1, 2, 3, 4, gi_slices]
        .into_iter()
        .filter(|&c| c <= gi_slices && (c <= 2 || c == gi_slices || gi_slices == 7))
        .collect();
    sizes.dedup();
    sizes
}

/// Creates a compute instance of `slices` compute slices in `gi` at the first
/// free aligned placement.
pub fn create_compute_instance(
    gi: &GpuInstanceState,
    gi_slices: u32,
    slices: u32,
    serial: u64,
    uuid: String,
) -> Result<ComputeInstanceState, nvmlReturn_t> {
    let profile_id = compute_profile_index(slices).ok_or(rc::INVALID_ARGUMENT)?;
    if !compute_slices_offered(gi_slices).contains(&slices) {
        return Err(rc::INVALID_ARGUMENT);
    }
    let placement = (0..gi_slices)
        .step_by(slices as usize)
        .map(|start| Placement { start, size: slices })
        .filter(|p| p.start + p.size <= gi_slices)
        .find(|p| !gi.compute_instances.iter().any(|ci| ci.placement.overlaps(p)))
        .ok_or(rc::INSUFFICIENT_RESOURCES)?;
    let id = lowest_free_id(0, gi.compute_instances.iter().map(|ci| ci.id));
    Ok(ComputeInstanceState {
        serial,
        id,
        profile_id,
        placement,
        uuid,
    })
}

fn lowest_free_id(first: u32, used: impl Iterator<Item = u32>) -> u32 {
    let used: Vec<u32> = used.collect();
    (first..).find(|id| !used.contains(id)).unwrap_or(first)
}

/// A MIG device UUID derived from the parent UUID and the instance serial,
/// in NVIDIA's `MIG-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` form (R470+).
pub fn mig_device_uuid(parent_uuid: &str, serial: u64) -> String {
    let mut hash: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for byte in parent_uuid.bytes().chain(serial.to_le_bytes()) {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    let hex = format!("{hash:032x}");
    format!(
        "MIG-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compute_instance_sizes_follow_the_published_lists() {
        assert_eq!(compute_slices_offered(1), [1]);
        assert_eq!(compute_slices_offered(2), [1, 2]);
        assert_eq!(compute_slices_offered(3), [1, 2, 3]);
        assert_eq!(compute_slices_offered(4), [1, 2, 4]);
        assert_eq!(compute_slices_offered(7), [1, 2, 3, 4, 7]);
    }

    #[test]
    fn mig_uuids_have_nvidia_form_and_differ_by_serial() {
        let first = mig_device_uuid("GPU-a", 1);
        let second = mig_device_uuid("GPU-a", 2);
        assert_ne!(first, second);
        assert_eq!(first.len(), "MIG-".len() + 36);
        let groups: Vec<usize> = first["MIG-".len()..].split('-').map(str::len).collect();
        assert_eq!(groups, [8, 4, 4, 4, 12]);
    }
}
