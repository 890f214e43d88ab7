//! The engine kept up to date event by event must equal one rebuilt from the same objects, after
//! every event of a random stream: slices arriving in any order (a device slice before its
//! counter slice, an allocated claim before its devices), removed and published again, replaced
//! by a newer generation or with a device fewer; classes coming and going; claims allocated by
//! the engine itself, pending, deallocated and deleted. After each event the two engines'
//! states (see `Allocator::state`) are compared, and every so often both allocate the same probe
//! claim and must choose the same devices.

use std::collections::BTreeMap;

use allocator_workloads::{Rng, device_set, unpinned};
use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

use crate::case::Case;
use crate::ours::from;

/// What the cluster holds at one point of the stream.
#[derive(Default)]
struct World {
    slices: BTreeMap<String, Value>,
    classes: BTreeMap<String, Value>,
    claims: BTreeMap<String, Value>,
}

impl World {
    fn rebuilt(&self) -> Allocator {
        let slices: Vec<ResourceSlice> = self.slices.values().map(from).collect();
        let classes: Vec<DeviceClass> = self.classes.values().map(from).collect();
        let claims: Vec<ResourceClaim> = self.claims.values().map(from).collect();
        Allocator::new(&slices, &classes, &claims)
    }
}

fn name(object: &Value) -> String {
    object["metadata"]["name"].as_str().unwrap_or_default().to_owned()
}

/// The first key whose description differs, with both descriptions.
fn first_difference(ours: &BTreeMap<String, String>, rebuilt: &BTreeMap<String, String>) -> Option<String> {
    let keys: std::collections::BTreeSet<&String> = ours.keys().chain(rebuilt.keys()).collect();
    keys.into_iter().find(|k| ours.get(*k) != rebuilt.get(*k)).map(|k| {
        format!(
            "{k}:\n  incremental: {:?}\n  rebuilt:     {:?}",
            ours.get(k),
            rebuilt.get(k)
        )
    })
}

/// A slice published again: a newer generation (of this slice alone, which leaves its pool
/// incomplete until the others follow), or the same with its last device gone.
fn republished(rng: &mut Rng, slice: &Value) -> Value {
    let mut next = slice.clone();
    if rng.chance(50) {
        let generation = next["spec"]["pool"]["generation"].as_i64().unwrap_or(1);
        next["spec"]["pool"]["generation"] = json!(generation + 1);
    } else if let Some(devices) = next["spec"]["devices"].as_array_mut()
        && devices.len() > 1
    {
        devices.pop();
    }
    next
}

/// Runs one random stream over `case`'s objects; `Err` describes the first divergence.
pub fn run_stream(case: &Case, classes: &[Value], seed: u64) -> Result<usize, String> {
    let mut rng = Rng::new(seed);
    let mut world = World::default();
    let mut engine = Allocator::default();
    let mut pending: Vec<Value> = case.slices().into_iter().map(unpinned).collect();
    let mut removed: Vec<Value> = Vec::new();
    let mut stream = case.claims.iter();
    let mut events = 0;
    let class_objects: Vec<Value> = classes.to_vec();
    for class in class_objects.iter().filter(|_| rng.chance(80)) {
        world.classes.insert(name(class), class.clone());
        engine.apply_class(&from(class));
    }
    loop {
        let what = rng.below(100);
        let event = match what {
            0..40 if !pending.is_empty() => {
                let slice = pending.swap_remove(rng.below(pending.len() as u64) as usize);
                engine.apply_slice(&from(&slice));
                world.slices.insert(name(&slice), slice);
                "publish a slice"
            }
            40..48 if !world.slices.is_empty() => {
                let key = world
                    .slices
                    .keys()
                    .nth(rng.below(world.slices.len() as u64) as usize)
                    .cloned()
                    .unwrap();
                let slice = world.slices.remove(&key).unwrap();
                engine.remove_slice(&key);
                removed.push(slice);
                "remove a slice"
            }
            48..52 if !removed.is_empty() => {
                let slice = removed.swap_remove(rng.below(removed.len() as u64) as usize);
                engine.apply_slice(&from(&slice));
                world.slices.insert(name(&slice), slice);
                "publish a removed slice again"
            }
            52..57 if !world.slices.is_empty() => {
                let key = world
                    .slices
                    .keys()
                    .nth(rng.below(world.slices.len() as u64) as usize)
                    .cloned()
                    .unwrap();
                let next = republished(&mut rng, &world.slices[&key]);
                engine.apply_slice(&from(&next));
                world.slices.insert(key, next);
                "republish a slice"
            }
            57..60 => {
                let class = &class_objects[rng.below(class_objects.len() as u64) as usize];
                if world.classes.remove(&name(class)).is_some() {
                    engine.remove_class(&name(class));
                } else {
                    world.classes.insert(name(class), class.clone());
                    engine.apply_class(&from(class));
                }
                "add or remove a class"
            }
            60..85 => {
                let Some(claim) = stream.next() else { break };
                let mut claim = claim.clone();
                let typed: ResourceClaim = from(&claim);
                if let Ok(Some(result)) = engine.allocate(&typed, None) {
                    claim["status"] = json!({"allocation": serde_json::to_value(&result).unwrap()});
                }
                engine.apply_claim(&from(&claim));
                world
                    .claims
                    .insert(claim["metadata"]["uid"].as_str().unwrap().to_owned(), claim);
                "allocate a claim"
            }
            85..95 if !world.claims.is_empty() => {
                let key = world
                    .claims
                    .keys()
                    .nth(rng.below(world.claims.len() as u64) as usize)
                    .cloned()
                    .unwrap();
                if rng.chance(50) {
                    world.claims.remove(&key);
                    engine.remove_claim(&key);
                    "delete a claim"
                } else {
                    let claim = world.claims.get_mut(&key).unwrap();
                    claim.as_object_mut().unwrap().remove("status");
                    engine.apply_claim(&from(claim));
                    "deallocate a claim"
                }
            }
            _ => continue,
        };
        events += 1;
        let mut rebuilt = world.rebuilt();
        if let Some(difference) = first_difference(&engine.state(), &rebuilt.state()) {
            return Err(format!("after event {events} ({event}): {difference}"));
        }
        if rng.chance(30)
            && let Some(probe) = case.claims.get(rng.below(case.claims.len() as u64) as usize)
        {
            let probe: ResourceClaim = from(probe);
            let ours = engine.allocate(&probe, None).map(|r| r.map(|r| device_set(&r)));
            let theirs = rebuilt.allocate(&probe, None).map(|r| r.map(|r| device_set(&r)));
            if ours != theirs {
                return Err(format!(
                    "after event {events} ({event}): a probe claim is allocated differently:\n  incremental: {ours:?}\n  rebuilt:     {theirs:?}"
                ));
            }
        }
    }
    Ok(events)
}
