//! A canonical description of what the engine knows and holds, in names rather than slots: its
//! pools and devices (with their resolved counters, node selection and card), what is in use
//! (devices, shares, counters, cards), what each node reaches in best-fit order, and what each
//! claim holds. Two engines fed the same objects, in any order and by any path, describe
//! themselves the same; the differential test compares an engine kept up to date event by event
//! with one rebuilt from scratch.

use std::collections::BTreeMap;

use crate::allocator::Allocator;

impl Allocator {
    /// The engine's state as (key, description) pairs, both independent of slots and order.
    pub fn state(&self) -> BTreeMap<String, String> {
        let inventory = &self.inventory;
        let mut state = BTreeMap::new();
        let device_name = |slot: u32| {
            let device = inventory.device(slot);
            let pool = inventory.pool(device.pool);
            format!("{}/{}/{}", pool.driver, pool.name, device.raw.name())
        };
        let set_name = |set: u32| {
            let pool = inventory
                .pools
                .iter()
                .flatten()
                .find(|p| p.sets.contains(&set))
                .map(|p| format!("{}/{}", p.driver, p.name))
                .unwrap_or_default();
            let name = inventory.counter_sets[set as usize]
                .as_ref()
                .map(|s| s.name.to_string());
            format!("{pool}/{}", name.unwrap_or_default())
        };
        for (key, id) in &inventory.pool_ids {
            let pool = inventory.pool(*id);
            state.insert(
                format!("pool {}/{}", key.0, key.1),
                format!(
                    "live={} incomplete={} problem={:?} slices={:?}",
                    pool.live,
                    pool.incomplete,
                    pool.problem,
                    pool.slices.iter().map(|s| (&*s.name, s.generation)).collect::<Vec<_>>()
                ),
            );
            for &slot in &pool.by_name {
                let device = inventory.device(slot);
                let consumes: Vec<String> = device
                    .consumes
                    .iter()
                    .map(|(set, positions)| format!("{} {:?}", set_name(set), positions.0))
                    .collect();
                state.insert(
                    format!("device {}", device_name(slot)),
                    format!(
                        "attributes={:?} capacity={:?} consumes={consumes:?} card={:?} binding={:?} taints={:?} fit=({}, {:?}) flags=({}, {}, {})",
                        device.raw.attributes().iter().collect::<Vec<_>>(),
                        device.raw.kind.capacity.0,
                        device.card.map(set_name),
                        inventory.binding_of(slot),
                        device.raw.taints(),
                        device.raw.kind.memory_slices,
                        device.raw.memory(),
                        device.raw.kind.shared,
                        device.raw.kind.has_binding_conditions,
                        device.raw.kind.is_mig,
                    ),
                );
            }
        }
        let usage = &self.usage;
        for (slot, count) in usage.exclusive.iter().enumerate() {
            if *count > 0 {
                state.insert(format!("exclusive {}", device_name(slot as u32)), count.to_string());
            }
        }
        for (slot, count) in &usage.shares {
            let capacity = usage.shared_capacity.get(slot);
            state.insert(
                format!("shares {}", device_name(*slot)),
                format!("{count} {capacity:?}"),
            );
        }
        for (set, used) in &usage.counters_used {
            if used.iter().any(|q| !q.is_zero()) {
                state.insert(format!("counters {}", set_name(*set)), format!("{used:?}"));
            }
        }
        for (card, held) in &usage.cards {
            let mut offers: Vec<_> = held.shared_offers.iter().map(|(d, n)| (device_name(*d), *n)).collect();
            offers.sort();
            if held.mig > 0 || held.physical_exclusive > 0 || !offers.is_empty() {
                state.insert(
                    format!("card {}", set_name(*card)),
                    format!(
                        "mig={} exclusive={} shared={offers:?}",
                        held.mig, held.physical_exclusive
                    ),
                );
            }
        }
        for (name, id) in &self.reach.node_ids {
            let reach = self.reach.nodes[*id as usize].as_ref().expect("indexed node");
            let devices: Vec<String> = reach.sorted.iter().map(|s| device_name(*s)).collect();
            state.insert(format!("node {name}"), devices.join(" "));
        }
        let everywhere: Vec<String> = self.reach.all_nodes.iter().map(|s| device_name(*s)).collect();
        state.insert("all nodes".to_owned(), everywhere.join(" "));
        for (selector, members) in &self.reach.selectors {
            let devices: Vec<String> = members.iter().map(|s| device_name(*s)).collect();
            state.insert(format!("selector {selector:?}"), devices.join(" "));
        }
        for (id, held) in &self.holdings.claims {
            let holdings: Vec<String> = held
                .holdings
                .iter()
                .map(|h| format!("{}/{}/{} taken={}", h.pool.0, h.pool.1, h.device, h.taken.is_some()))
                .collect();
            state.insert(format!("claim {id} {}", held.name), holdings.join(", "));
        }
        state
    }
}
