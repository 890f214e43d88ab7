//! Random claim streams for the differential test, over inventories of 1-4 cards of A30, A100
//! and H100 per node, each offered as Physical, as every placement of one MIG profile per size and
//! (sometimes) as a shared Physical offer, in the 1.34 or the 1.35+ slice layout
//! (allocator-workloads builds them). Some requests ask for admin access, mostly to MIG
//! partitions, whose counters the scheduler still checks for the allocation in flight. Shared
//! requests ask for `sharePercent`, `memory`, both or neither (`shared_memory` checks that
//! memory keeps shares off a card now and then).

use allocator_workloads::{A30, A100_SXM4_40GB, DRIVER, H100_SXM5_80GB, NodeShape, Rng};
use serde_json::{Value, json};

/// 1-4 cards per node; taints only where Go honours them (1.37).
pub fn node_shape(split_layout: bool, taints: bool) -> NodeShape<'static> {
    NodeShape {
        cards_min: 1,
        cards_spread: 4,
        models: &[&A30, &A100_SXM4_40GB, &H100_SXM5_80GB],
        shared_offer_percent: 50,
        mig_offers_percent: 75,
        one_profile_per_size: true,
        taint_percent: if taints { 10 } else { 0 },
        split_layout,
    }
}

/// Percent of `exactly` requests for MIG partitions that ask for admin access (a quarter of that
/// for the other classes).
const ADMIN_PERCENT: u64 = 20;

/// Percent of shared requests that ask for `memory` beside (or instead of) `sharePercent`.
const MEMORY_PERCENT: u64 = 50;

/// What a share asks of a card's memory (24, 40 or 80 GiB): small, large enough that two or three
/// shares fill an A30 or an A100 while their sharePercent still fits, and decimal sizes the
/// offer's 1 MiB step rounds up.
const SHARE_MEMORY: [&str; 7] = ["512Mi", "2Gi", "1500M", "10Gi", "16Gi", "30Gi", "41000M"];

/// `admin`: whether the request may ask for admin access (subrequests of `firstAvailable` cannot).
fn exact(rng: &mut Rng, class: &str, taints: bool, admin: bool) -> Value {
    // The API server stores the defaulted mode; the allocator relies on it.
    let mut r = json!({"deviceClassName": class, "allocationMode": "ExactCount", "count": 1 + rng.below(2)});
    let admin_percent = if class == "gpu-mig" {
        ADMIN_PERCENT
    } else {
        ADMIN_PERCENT / 4
    };
    if admin && rng.chance(admin_percent) {
        r["adminAccess"] = json!(true);
    }
    if rng.chance(30) {
        let gi = [5, 10, 12, 20, 40][rng.below(5) as usize];
        r["selectors"] = json!([{"cel": {"expression": format!("device.capacity[\"{DRIVER}\"].memory.compareTo(quantity(\"{gi}Gi\")) >= 0")}}]);
    }
    if class == "gpu-shared" {
        let mut requests = serde_json::Map::new();
        if rng.chance(60) {
            requests.insert("sharePercent".into(), json!(format!("{}", 5 + rng.below(60))));
        }
        if rng.chance(MEMORY_PERCENT) {
            let memory = SHARE_MEMORY[rng.below(SHARE_MEMORY.len() as u64) as usize];
            requests.insert("memory".into(), json!(memory));
        }
        if !requests.is_empty() {
            r["capacity"] = json!({"requests": requests});
        }
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
            let first = exact(rng, "gpu-mig", taints, false);
            let second_class = classes[1 + rng.below(2) as usize];
            let second = exact(rng, second_class, taints, false);
            let sub = |name: &str, mut r: Value| {
                r["name"] = json!(name);
                r
            };
            requests
                .push(json!({"name": format!("r{i}"), "firstAvailable": [sub("mig", first), sub("whole", second)]}));
        } else {
            requests.push(json!({"name": format!("r{i}"), "exactly": exact(rng, class, taints, true)}));
        }
    }
    let mut devices = json!({"requests": requests});
    if n == 2 && rng.chance(30) {
        let kind = if rng.chance(50) {
            "matchAttribute"
        } else {
            "distinctAttribute"
        };
        // The model, or the standard NUMA node the workload's cards publish (an int, which best
        // fit's topology groups by too).
        let attribute = if rng.chance(50) {
            format!("{DRIVER}/device")
        } else {
            "resource.kubernetes.io/numaNode".to_owned()
        };
        devices["constraints"] = json!([{kind: attribute}]);
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")}, "spec": {"devices": devices}})
}
