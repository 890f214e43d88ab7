//! Random inventories and claims shaped like the gpu module publishes them: per node 1-4 cards of
//! A30/A100/H100, each offered as Physical, as every MIG placement and (sometimes) as a shared
//! Physical offer, with a `pgpu-<pci>` counter set in the 1.34 layout (counters in the device
//! slice) or the 1.35+ layout (a separate counter slice).

use serde_json::{Value, json};

/// SplitMix64: small, seedable, good enough to explore.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct Model {
    name: &'static str,
    memory_gi: u64,
    slices: u32,
    // (profile, memory slices, memory Gi, placement starts)
    profiles: &'static [(&'static str, u32, u64, &'static [u32])],
}

const MODELS: [Model; 3] = [
    Model {
        name: "a30",
        memory_gi: 24,
        slices: 4,
        profiles: &[
            ("1g.6gb", 1, 6, &[0, 1, 2, 3]),
            ("2g.12gb", 2, 12, &[0, 2]),
            ("4g.24gb", 4, 24, &[0]),
        ],
    },
    Model {
        name: "a100",
        memory_gi: 40,
        slices: 8,
        profiles: &[
            ("1g.5gb", 1, 5, &[0, 1, 2, 3, 4, 5, 6]),
            ("2g.10gb", 2, 10, &[0, 2, 4]),
            ("3g.20gb", 4, 20, &[0, 4]),
            ("7g.40gb", 8, 40, &[0]),
        ],
    },
    Model {
        name: "h100",
        memory_gi: 80,
        slices: 8,
        profiles: &[
            ("1g.10gb", 1, 10, &[0, 1, 2, 3, 4, 5, 6]),
            ("2g.20gb", 2, 20, &[0, 2, 4]),
            ("3g.40gb", 4, 40, &[0, 4]),
            ("7g.80gb", 8, 80, &[0]),
        ],
    },
];

pub const DRIVER: &str = "gpu.deckhouse.io";

fn label(s: &str) -> String {
    s.replace(['.', ':'], "-").replace('+', "-")
}

fn device(name: &str, pool: &str, attrs: Value, memory_gi: u64, set: &str, counters: Value, shared: bool) -> Value {
    let mut attributes = attrs;
    attributes["harness.test/id"] = json!({"string": format!("{pool}/{name}")});
    let mut capacity = json!({"memory": {"value": format!("{memory_gi}Gi")}});
    let mut d = json!({"name": name, "attributes": attributes, "consumesCounters": [{"counterSet": set, "counters": counters}]});
    if shared {
        capacity["memory"]["requestPolicy"] = json!({"default": "0", "validRange": {"min": "0"}});
        capacity["sharePercent"] = json!({"value": "100", "requestPolicy": {"default": "10", "validRange": {"min": "1", "max": "100", "step": "1"}}});
        d["allowMultipleAllocations"] = json!(true);
    }
    d["capacity"] = capacity;
    d
}

/// One node's slices. `split_layout`: counters in their own slice (1.35+).
pub fn node_slices(rng: &mut Rng, node: &str, split_layout: bool, taints: bool) -> Vec<Value> {
    let pool = format!("gpus/{node}");
    let cards = 1 + rng.below(4) as usize;
    let mut per_card: Vec<(Value, Vec<Value>)> = Vec::new();
    for card in 0..cards {
        let model = &MODELS[rng.below(3) as usize];
        let pci = format!("0000:{:02x}:00.0", 0x10 + card * 0x10);
        let set = format!("pgpu-{}", label(&pci));
        let mut counters = json!({"memory": {"value": format!("{}Gi", model.memory_gi)}});
        for i in 0..model.slices {
            counters[format!("memory-slice-{i}")] = json!({"value": "1"});
        }
        let counter_set = json!({"name": set, "counters": counters});
        let base = |device_type: &str| {
            json!({
                "gpu.deckhouse.io/deviceType": {"string": device_type},
                "gpu.deckhouse.io/device": {"string": model.name},
                "gpu.deckhouse.io/pciAddress": {"string": pci},
            })
        };
        let all_slices = |from: u32, n: u32, gi: u64| {
            let mut c = json!({"memory": {"value": format!("{gi}Gi")}});
            for i in from..from + n {
                c[format!("memory-slice-{i}")] = json!({"value": "1"});
            }
            c
        };
        let mut devices = vec![device(
            &format!("gpu{card}"),
            &pool,
            base("Physical"),
            model.memory_gi,
            &set,
            all_slices(0, model.slices, model.memory_gi),
            false,
        )];
        if rng.chance(50) {
            devices.push(device(
                &format!("gpu{card}-shared"),
                &pool,
                base("Physical"),
                model.memory_gi,
                &set,
                all_slices(0, model.slices, model.memory_gi),
                true,
            ));
        }
        if rng.chance(75) {
            for (profile, slices, gi, starts) in model.profiles {
                for start in *starts {
                    let mut attrs = base("MIG");
                    attrs["gpu.deckhouse.io/migProfile"] = json!({"string": profile});
                    let name = format!("gpu{card}-mig-{}-{start}", label(profile).replace('-', ""));
                    devices.push(device(
                        &name,
                        &pool,
                        attrs,
                        *gi,
                        &set,
                        all_slices(*start, *slices, *gi),
                        false,
                    ));
                }
            }
        }
        if taints && rng.chance(10) {
            devices[0]["taints"] =
                json!([{"key": "gpu.deckhouse.io/unhealthy", "value": "xid", "effect": "NoSchedule"}]);
        }
        per_card.push((counter_set, devices));
    }
    let slice = |name: String, body: Value| {
        let mut s = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": DRIVER, "pool": {"name": pool, "generation": 1, "resourceSliceCount": 0}, "nodeName": node}});
        for (k, v) in body.as_object().expect("object") {
            s["spec"][k] = v.clone();
        }
        s
    };
    let mut slices = Vec::new();
    if split_layout {
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

fn exact(rng: &mut Rng, class: &str, taints: bool) -> Value {
    // The API server stores the defaulted mode; the allocator relies on it.
    let mut r = json!({"deviceClassName": class, "allocationMode": "ExactCount", "count": 1 + rng.below(2)});
    if rng.chance(30) {
        let gi = [5, 10, 12, 20, 40][rng.below(5) as usize];
        r["selectors"] = json!([{"cel": {"expression": format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{gi}Gi\")) >= 0")}}]);
    }
    if class == "gpu-shared" && rng.chance(60) {
        r["capacity"] = json!({"requests": {"sharePercent": format!("{}", 5 + rng.below(60))}});
    }
    if taints && rng.chance(30) {
        r["tolerations"] = json!([{"key": "gpu.deckhouse.io/unhealthy", "operator": "Exists"}]);
    }
    r
}

pub fn claim(rng: &mut Rng, name: &str, taints: bool) -> Value {
    let classes = ["gpu-mig", "gpu-physical", "gpu-shared", "gpu-any"];
    let mut requests = Vec::new();
    let n = 1 + rng.below(2);
    for i in 0..n {
        let class = classes[rng.below(4) as usize];
        if rng.chance(25) {
            let first = exact(rng, "gpu-mig", taints);
            let second_class = classes[1 + rng.below(2) as usize];
            let second = exact(rng, second_class, taints);
            let sub = |name: &str, mut r: Value| {
                r["name"] = json!(name);
                r
            };
            requests
                .push(json!({"name": format!("r{i}"), "firstAvailable": [sub("mig", first), sub("whole", second)]}));
        } else {
            requests.push(json!({"name": format!("r{i}"), "exactly": exact(rng, class, taints)}));
        }
    }
    let mut devices = json!({"requests": requests});
    if n == 2 && rng.chance(30) {
        let kind = if rng.chance(50) {
            "matchAttribute"
        } else {
            "distinctAttribute"
        };
        devices["constraints"] = json!([{kind: format!("{DRIVER}/device")}]);
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}, "spec": {"devices": devices}})
}
