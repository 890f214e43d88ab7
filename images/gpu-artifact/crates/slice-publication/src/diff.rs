//! What to write so that the stored pool becomes the desired one, with as few writes as possible:
//! nothing when the stored generation already says what we want (a restart adopts it), otherwise
//! every desired slice at a new generation, then the deletion of slices that are no longer part of
//! the pool. Consumers use only the slices of a pool's highest generation, so a changed pool is
//! always written whole under a new generation.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{ResourceSlice, ResourceSliceSpec};

use crate::quantity::canonical;

/// The writes that turn the stored pool into the desired one.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The pool generation after the plan ran.
    pub generation: i64,
    /// Slices to server-side apply, in order, already at `generation`.
    pub apply: Vec<ResourceSlice>,
    /// Names of stored slices to delete after the applies succeeded.
    pub delete: Vec<String>,
}

/// `desired` are the slices we want (any generation); `stored` every slice of our driver on the
/// node.
pub fn plan(desired: &[ResourceSlice], stored: &[ResourceSlice]) -> Plan {
    let stored_generation = stored.iter().map(|s| s.spec.pool.generation).max();
    let current: BTreeMap<&str, &ResourceSlice> = stored
        .iter()
        .filter(|s| Some(s.spec.pool.generation) == stored_generation)
        .filter_map(|s| Some((s.metadata.name.as_deref()?, s)))
        .collect();
    let unchanged = stored_generation.is_some()
        && current.len() == desired.len()
        && desired.iter().all(|want| {
            let name = want.metadata.name.as_deref().unwrap_or_default();
            current.get(name).is_some_and(|have| same_content(want, have))
        });
    let generation = match stored_generation {
        Some(generation) if unchanged => generation,
        Some(generation) => generation + 1,
        None => 1,
    };
    let apply = if unchanged {
        Vec::new()
    } else {
        desired
            .iter()
            .cloned()
            .map(|mut slice| {
                slice.spec.pool.generation = generation;
                slice
            })
            .collect()
    };
    let keep: BTreeSet<&str> = desired.iter().filter_map(|s| s.metadata.name.as_deref()).collect();
    let delete = stored
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .filter(|name| !keep.contains(name))
        .map(str::to_owned)
        .collect();
    Plan {
        generation,
        apply,
        delete,
    }
}

/// Same spec apart from the generation, and the same owners.
fn same_content(want: &ResourceSlice, have: &ResourceSlice) -> bool {
    want.metadata.owner_references == have.metadata.owner_references && comparable(&want.spec) == comparable(&have.spec)
}

/// The spec with the generation cleared, quantities by value and empty lists as absent (the server
/// omits empty lists).
fn comparable(spec: &ResourceSliceSpec) -> ResourceSliceSpec {
    let mut spec = spec.clone();
    spec.pool.generation = 0;
    spec.devices = spec.devices.filter(|d| !d.is_empty());
    spec.shared_counters = spec.shared_counters.filter(|s| !s.is_empty());
    for set in spec.shared_counters.iter_mut().flatten() {
        for counter in set.counters.values_mut() {
            counter.value = canonical(&counter.value);
        }
    }
    for device in spec.devices.iter_mut().flatten() {
        for capacity in device.capacity.iter_mut().flat_map(|c| c.values_mut()) {
            capacity.value = canonical(&capacity.value);
            for policy in capacity.request_policy.iter_mut() {
                policy.default = policy.default.as_ref().map(canonical);
                for range in policy.valid_range.iter_mut() {
                    range.min = canonical(&range.min);
                    range.max = range.max.as_ref().map(canonical);
                    range.step = range.step.as_ref().map(canonical);
                }
                for value in policy.valid_values.iter_mut().flatten() {
                    *value = canonical(value);
                }
            }
        }
        for consumption in device.consumes_counters.iter_mut().flatten() {
            for counter in consumption.counters.values_mut() {
                counter.value = canonical(&counter.value);
            }
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{Counter, CounterSet, Device, ResourcePool};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn slice(name: &str, generation: i64, count: i64, devices: &[&str], memory: &str) -> ResourceSlice {
        ResourceSlice {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: "gpu.deckhouse.io".into(),
                node_name: Some("n".into()),
                pool: ResourcePool {
                    name: "gpus/n".into(),
                    generation,
                    resource_slice_count: count,
                },
                devices: Some(
                    devices
                        .iter()
                        .map(|d| Device {
                            name: (*d).into(),
                            ..Device::default()
                        })
                        .collect(),
                ),
                shared_counters: Some(vec![CounterSet {
                    name: "pgpu-0000-01-00-0".into(),
                    counters: [(
                        "memory".to_owned(),
                        Counter {
                            value: Quantity(memory.into()),
                        },
                    )]
                    .into(),
                }]),
                ..ResourceSliceSpec::default()
            },
        }
    }

    #[test]
    fn a_first_publication_writes_everything_at_generation_one() {
        let desired = [
            slice("s-0", 0, 2, &["gpu0"], "1000"),
            slice("s-1", 0, 2, &["gpu1"], "1000"),
        ];
        let plan = plan(&desired, &[]);
        assert_eq!(plan.generation, 1);
        assert_eq!(plan.apply.len(), 2);
        assert!(plan.apply.iter().all(|s| s.spec.pool.generation == 1));
        assert!(plan.delete.is_empty());
    }

    #[test]
    fn an_equal_stored_pool_is_adopted_without_writes() {
        let desired = [slice("s-0", 0, 1, &["gpu0"], "1000")];
        // The server spells 1000 as 1k.
        let stored = [slice("s-0", 7, 1, &["gpu0"], "1k")];
        assert_eq!(
            plan(&desired, &stored),
            Plan {
                generation: 7,
                apply: vec![],
                delete: vec![]
            }
        );
    }

    #[test]
    fn a_change_bumps_the_generation_of_every_slice_and_deletes_the_stale_ones() {
        let desired = [slice("s-0", 0, 1, &["gpu0"], "1000")];
        let stored = [
            slice("s-0", 4, 2, &["gpu0"], "1000"),
            slice("s-1", 4, 2, &["gpu1"], "1000"),
        ];
        let plan = plan(&desired, &stored);
        assert_eq!(plan.generation, 5, "the count changed from 2 to 1");
        assert_eq!(plan.apply.len(), 1);
        assert_eq!(plan.apply[0].spec.pool.generation, 5);
        assert_eq!(plan.delete, ["s-1"]);
    }

    #[test]
    fn request_policies_are_compared_by_value() {
        use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, CapacityRequestPolicyRange, DeviceCapacity};
        let with_policy = |generation, max: &str, step: &str| {
            let mut slice = slice("s-0", generation, 1, &["gpu0-mps"], "1000");
            let capacity = DeviceCapacity {
                value: Quantity(max.into()),
                request_policy: Some(CapacityRequestPolicy {
                    default: Some(Quantity("0".into())),
                    valid_range: Some(CapacityRequestPolicyRange {
                        min: Quantity("0".into()),
                        max: Some(Quantity(max.into())),
                        step: Some(Quantity(step.into())),
                    }),
                    valid_values: None,
                }),
            };
            slice.spec.devices.as_mut().unwrap()[0].capacity = Some([("memory".to_owned(), capacity)].into());
            slice
        };
        let desired = [with_policy(0, "25769803776", "1048576")];
        assert_eq!(
            plan(&desired, &[with_policy(3, "24Gi", "1Mi")]).generation,
            3,
            "adopted"
        );
        assert_eq!(
            plan(&desired, &[with_policy(3, "24Gi", "2Mi")]).generation,
            4,
            "a changed step"
        );
    }

    #[test]
    fn a_changed_counter_is_a_change() {
        let desired = [slice("s-0", 0, 1, &["gpu0"], "2000")];
        let stored = [slice("s-0", 1, 1, &["gpu0"], "1000")];
        assert_eq!(plan(&desired, &stored).generation, 2);
    }

    #[test]
    fn leftovers_of_an_older_generation_are_deleted_without_a_new_generation() {
        let desired = [slice("s-0", 0, 1, &["gpu0"], "1000")];
        let stored = [
            slice("s-0", 3, 1, &["gpu0"], "1000"),
            slice("s-1", 2, 2, &["gpu1"], "1000"),
        ];
        let plan = plan(&desired, &stored);
        assert_eq!((plan.generation, plan.apply.len()), (3, 0));
        assert_eq!(plan.delete, ["s-1"]);
    }

    #[test]
    fn a_pool_caught_between_generations_is_rewritten() {
        // A crash after writing s-0 at generation 3 but before s-1: the pool is incomplete.
        let desired = [
            slice("s-0", 0, 2, &["gpu0"], "1000"),
            slice("s-1", 0, 2, &["gpu1"], "1000"),
        ];
        let stored = [
            slice("s-0", 3, 2, &["gpu0"], "1000"),
            slice("s-1", 2, 2, &["gpu1"], "1000"),
        ];
        let plan = plan(&desired, &stored);
        assert_eq!((plan.generation, plan.apply.len()), (4, 2));
    }

    #[test]
    fn nothing_desired_deletes_everything() {
        let stored = [slice("s-0", 3, 1, &["gpu0"], "1000")];
        let plan = plan(&[], &stored);
        assert!(plan.apply.is_empty());
        assert_eq!(plan.delete, ["s-0"]);
    }
}
