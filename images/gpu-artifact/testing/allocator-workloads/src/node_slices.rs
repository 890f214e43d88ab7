//! One node's ResourceSlices as the gpu module publishes them: per card a Physical offer, every
//! MIG placement and (sometimes) a shared Physical offer, all consuming a `pgpu-<pci>` counter
//! set of memory and memory slices; the counters in the device slice (1.34 layout) or in a
//! separate counter slice (1.35+ layout). Every card says where it sits, as on a two-socket board:
//! the first half of the cards on NUMA node 0 under root `pci0000:00`, the rest on NUMA node 1
//! under `pci0000:80`, and the SXM cards of a node in one NVLink domain (an HGX board's
//! NVSwitches). Every device carries a `harness.test/id` attribute so
//! a claim can be pinned to exact devices (see `pinning`).

use serde_json::{Value, json};

use crate::{GpuModel, Rng};

pub const DRIVER: &str = "gpu.deckhouse.io";

/// The attribute that names each device uniquely, for pinning; gpu-handler publishes no such thing.
pub const PIN_ATTRIBUTE: &str = "harness.test/id";

/// What a node looks like; every random choice is drawn from the caller's `Rng`.
pub struct NodeShape<'a> {
    /// Cards per node: `cards_min + below(cards_spread)`.
    pub cards_min: usize,
    pub cards_spread: u64,
    /// Each card's model is drawn from this list.
    pub models: &'a [&'a GpuModel],
    pub shared_offer_percent: u64,
    pub mig_offers_percent: u64,
    /// Offer only the first profile of each memory-slice size (1g, 2g, 3g, 7g on an A100/H100),
    /// which keeps inventories small; otherwise every profile of the table.
    pub one_profile_per_size: bool,
    /// Chance of an `unhealthy` NoSchedule taint on a card's Physical offer.
    pub taint_percent: u64,
    /// Counters in their own slice (1.35+) instead of the device slice (1.34).
    pub split_layout: bool,
}

fn label(s: &str) -> String {
    s.replace(['.', ':'], "-").replace('+', "-")
}

fn device(name: &str, pool: &str, attrs: Value, memory_gi: u64, set: &str, counters: Value, shared: bool) -> Value {
    let mut attributes = attrs;
    attributes[PIN_ATTRIBUTE] = json!({"string": format!("{pool}/{name}")});
    let mut capacity = json!({"memory": {"value": format!("{memory_gi}Gi")}});
    let mut d = json!({"name": name, "attributes": attributes, "consumesCounters": [{"counterSet": set, "counters": counters}]});
    if shared {
        // As the real shared offer (dra-offers `shared_capacity`): a share consumes no memory
        // unless it asks, and what it asks is counted in steps of 1 MiB.
        let bytes = memory_gi << 30;
        capacity["memory"]["requestPolicy"] =
            json!({"default": "0", "validRange": {"min": "0", "max": bytes.to_string(), "step": "1Mi"}});
        capacity["sharePercent"] = json!({"value": "100", "requestPolicy": {"default": "10", "validRange": {"min": "1", "max": "100", "step": "1"}}});
        d["allowMultipleAllocations"] = json!(true);
    }
    d["capacity"] = capacity;
    d
}

/// One card of `cards`: its counter set and its offers.
fn card_offers(rng: &mut Rng, shape: &NodeShape, pool: &str, card: usize, cards: usize) -> (Value, Vec<Value>) {
    let model = shape.models[rng.below(shape.models.len() as u64) as usize];
    let pci = format!("0000:{:02x}:00.0", 0x10 + card * 0x10);
    let set = format!("pgpu-{}", label(&pci));
    let mut counters = json!({"memory": {"value": format!("{}Gi", model.memory_gi)}});
    for i in 0..model.memory_slices {
        counters[format!("memory-slice-{i}")] = json!({"value": "1"});
    }
    let media = model.profiles.iter().any(|p| p.media);
    if media {
        counters["media-extensions"] = json!({"value": "1"});
    }
    let counter_set = json!({"name": set, "counters": counters});
    let numa = (card * 2 / cards.max(1)) as i64;
    let root = ["pci0000:00", "pci0000:80"][numa as usize];
    let base = |device_type: &str| {
        let mut attributes = json!({
            "gpu.deckhouse.io/deviceType": {"string": device_type},
            "gpu.deckhouse.io/device": {"string": model.name},
            "gpu.deckhouse.io/pciAddress": {"string": pci},
            "resource.kubernetes.io/numaNode": {"int": numa},
            "resource.kubernetes.io/pcieRoot": {"string": root},
        });
        if model.name.contains("sxm") {
            attributes["gpu.deckhouse.io/nvlinkDomain"] = json!({"string": "0000:05:00.0"});
        }
        attributes
    };
    let slices_from = |from: u32, n: u32, gi: u64| {
        let mut c = json!({"memory": {"value": format!("{gi}Gi")}});
        for i in from..from + n {
            c[format!("memory-slice-{i}")] = json!({"value": "1"});
        }
        c
    };
    let mut whole = slices_from(0, model.memory_slices, model.memory_gi);
    if media {
        whole["media-extensions"] = json!({"value": "1"});
    }
    let physical = |name: String, shared: bool| {
        device(
            &name,
            pool,
            base("Physical"),
            model.memory_gi,
            &set,
            whole.clone(),
            shared,
        )
    };
    let mut devices = vec![physical(format!("gpu{card}"), false)];
    if rng.chance(shape.shared_offer_percent) {
        devices.push(physical(format!("gpu{card}-shared"), true));
    }
    if rng.chance(shape.mig_offers_percent) {
        let mut sizes_offered = Vec::new();
        for profile in model.profiles {
            if shape.one_profile_per_size {
                if sizes_offered.contains(&profile.memory_slices) {
                    continue;
                }
                sizes_offered.push(profile.memory_slices);
            }
            for start in profile.starts {
                let mut attrs = base("MIG");
                attrs["gpu.deckhouse.io/migProfile"] = json!({"string": profile.name});
                let name = format!("gpu{card}-mig-{}-{start}", label(profile.name).replace('-', ""));
                let mut counters = slices_from(*start, profile.memory_slices, profile.memory_gi);
                if profile.media {
                    counters["media-extensions"] = json!({"value": "1"});
                }
                devices.push(device(&name, pool, attrs, profile.memory_gi, &set, counters, false));
            }
        }
    }
    if shape.taint_percent > 0 && rng.chance(shape.taint_percent) {
        devices[0]["taints"] = json!([{"key": "gpu.deckhouse.io/unhealthy", "value": "xid", "effect": "NoSchedule"}]);
    }
    (counter_set, devices)
}

/// One node's slices, in pool `gpus/<node>`.
pub fn node_slices(rng: &mut Rng, node: &str, shape: &NodeShape) -> Vec<Value> {
    let pool = format!("gpus/{node}");
    let cards = shape.cards_min + rng.below(shape.cards_spread) as usize;
    let per_card: Vec<(Value, Vec<Value>)> = (0..cards)
        .map(|card| card_offers(rng, shape, &pool, card, cards))
        .collect();
    let slice = |name: String, body: Value| {
        let mut s = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 0}, "nodeName": node}});
        for (k, v) in body.as_object().expect("object") {
            s["spec"][k] = v.clone();
        }
        s
    };
    let mut slices = Vec::new();
    if shape.split_layout {
        let sets: Vec<Value> = per_card.iter().map(|(s, _)| s.clone()).collect();
        for (i, chunk) in sets.chunks(8).enumerate() {
            slices.push(slice(format!("{node}-counters-{i}"), json!({"sharedCounters": chunk})));
        }
        let devices: Vec<Value> = per_card.into_iter().flat_map(|(_, d)| d).collect();
        for (i, chunk) in devices.chunks(64).enumerate() {
            slices.push(slice(format!("{node}-devices-{i}"), json!({"devices": chunk})));
        }
    } else {
        for (i, (set, devices)) in per_card.into_iter().enumerate() {
            slices.push(slice(
                format!("{node}-gpu{i}"),
                json!({"sharedCounters": [set], "devices": devices}),
            ));
        }
    }
    let count = slices.len();
    for s in &mut slices {
        s["spec"]["pool"]["resourceSliceCount"] = json!(count);
    }
    slices
}

/// The module's DeviceClasses, plus `gpu-any` for claims that take whatever fits.
pub fn classes() -> Vec<Value> {
    let class = |name: &str, expr: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\" && {expr}")}}]}})
    };
    vec![
        class(
            "gpu-mig",
            r#"device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#,
        ),
        class(
            "gpu-physical",
            r#"device.attributes["gpu.deckhouse.io"].deviceType == "Physical" && !device.allowMultipleAllocations"#,
        ),
        class("gpu-shared", "device.allowMultipleAllocations"),
        class("gpu-any", "true"),
    ]
}
