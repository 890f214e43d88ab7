//! Opaque NVML handles. A handle is a pointer-sized value that encodes what
//! it refers to: a tag and a payload (device index, instance serial, event
//! set id). Instance serials are never reused, so a handle to a destroyed
//! instance stays stale (`NVML_ERROR_INVALID_ARGUMENT`) even if a new
//! instance gets the same GPU instance id.

use nvml_wrapper_sys::bindings::{nvmlComputeInstance_t, nvmlDevice_t, nvmlEventSet_t, nvmlGpuInstance_t};

const TAG_SHIFT: u32 = 56;
const PAYLOAD_MASK: u64 = (1 << TAG_SHIFT) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    Device = 1,
    MigDevice = 2,
    GpuInstance = 3,
    ComputeInstance = 4,
    EventSet = 5,
}

fn encode(tag: Tag, payload: u64) -> usize {
    (((tag as u64) << TAG_SHIFT) | (payload & PAYLOAD_MASK)) as usize
}

fn decode(raw: usize, tag: Tag) -> Option<u64> {
    let raw = raw as u64;
    (raw >> TAG_SHIFT == tag as u64).then_some(raw & PAYLOAD_MASK)
}

/// What a device handle names: a whole card or a MIG device on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceHandle {
    Physical {
        index: usize,
    },
    /// Named by the serial of its compute instance.
    Mig {
        compute_instance_serial: u64,
    },
}

pub fn device_to_raw(handle: DeviceHandle) -> nvmlDevice_t {
    let raw = match handle {
        DeviceHandle::Physical { index } => encode(Tag::Device, index as u64 + 1),
        DeviceHandle::Mig {
            compute_instance_serial,
        } => encode(Tag::MigDevice, compute_instance_serial),
    };
    raw as nvmlDevice_t
}

pub fn device_from_raw(raw: nvmlDevice_t) -> Option<DeviceHandle> {
    let raw = raw as usize;
    if let Some(index) = decode(raw, Tag::Device).filter(|i| *i > 0) {
        return Some(DeviceHandle::Physical {
            index: (index - 1) as usize,
        });
    }
    decode(raw, Tag::MigDevice).map(|compute_instance_serial| DeviceHandle::Mig {
        compute_instance_serial,
    })
}

pub fn gpu_instance_to_raw(serial: u64) -> nvmlGpuInstance_t {
    encode(Tag::GpuInstance, serial) as nvmlGpuInstance_t
}

pub fn gpu_instance_from_raw(raw: nvmlGpuInstance_t) -> Option<u64> {
    decode(raw as usize, Tag::GpuInstance)
}

pub fn compute_instance_to_raw(serial: u64) -> nvmlComputeInstance_t {
    encode(Tag::ComputeInstance, serial) as nvmlComputeInstance_t
}

pub fn compute_instance_from_raw(raw: nvmlComputeInstance_t) -> Option<u64> {
    decode(raw as usize, Tag::ComputeInstance)
}

pub fn event_set_to_raw(id: u64) -> nvmlEventSet_t {
    encode(Tag::EventSet, id) as nvmlEventSet_t
}

pub fn event_set_from_raw(raw: nvmlEventSet_t) -> Option<u64> {
    decode(raw as usize, Tag::EventSet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip_and_do_not_cross_kinds() {
        let device = device_to_raw(DeviceHandle::Physical { index: 3 });
        assert_eq!(device_from_raw(device), Some(DeviceHandle::Physical { index: 3 }));
        let gi = gpu_instance_to_raw(42);
        assert_eq!(gpu_instance_from_raw(gi), Some(42));
        assert_eq!(compute_instance_from_raw(gi as nvmlComputeInstance_t), None);
        assert_eq!(device_from_raw(std::ptr::null_mut()), None);
    }
}
