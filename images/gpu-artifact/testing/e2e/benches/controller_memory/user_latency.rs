//! What a user feels at the bench's scale (issue 34, "Measure"): a claim created, with the gated Pod
//! that waits for it, to its allocation written by gpu-dra-controller, one claim at a time on the
//! loaded cluster; beside the same claim whose allocation the bench writes itself, at once, in one
//! plain write of the claim's status (the least any allocator could cost). Both are timed from the
//! claim's create to the allocation read back from the API server.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use testbed::TestNamespace;

/// How often the allocation is read back while it is awaited.
const POLL: Duration = Duration::from_millis(2);
/// A claim the controller has not allocated in this long fails the bench.
const GIVE_UP: Duration = Duration::from_secs(60);

/// A claim of one 1g.10gb MIG partition: the size the loaded cluster has most room for.
fn small_claim(name: &str) -> ResourceClaim {
    let selector = "device.attributes[\"gpu.deckhouse.io\"].migProfile == \"1g.10gb\"";
    serde_json::from_value(json!({"metadata": {"name": name, "labels": {"bench": "user-latency"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu-mig",
            "selectors": [{"cel": {"expression": selector}}]}}]}}}))
    .expect("a valid claim")
}

/// An allocation of another driver's device: the API server stores it as it stores ours, and
/// gpu-dra-controller, which audits only its own driver's results, leaves it alone.
fn foreign_allocation(i: usize) -> serde_json::Value {
    json!({"status": {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": "baseline.example.com", "pool": "baseline",
            "device": format!("d{i}")}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
            "values": ["baseline"]}]}]}}}})
}

async fn until_allocated(claims: &Api<ResourceClaim>, name: &str, start: Instant) -> Duration {
    loop {
        let claim = claims.get(name).await.expect("the claim is read");
        if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < GIVE_UP,
            "claim {name} not allocated after {GIVE_UP:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// `count` claims through gpu-dra-controller, then `count` written directly; both latencies, sorted.
pub async fn measure(ns: &TestNamespace, count: usize, gated_pod: fn(&str) -> Pod) -> (Vec<Duration>, Vec<Duration>) {
    let (claims, pods) = (ns.api::<ResourceClaim>(), ns.api::<Pod>());
    let create = PostParams::default();
    let mut ours = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("user-latency-{i:03}");
        let start = Instant::now();
        claims.create(&create, &small_claim(&name)).await.expect("claim stored");
        pods.create(&create, &gated_pod(&name)).await.expect("Pod stored");
        ours.push(until_allocated(&claims, &name, start).await);
    }
    let mut direct = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("user-latency-direct-{i:03}");
        let start = Instant::now();
        claims.create(&create, &small_claim(&name)).await.expect("claim stored");
        claims
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&foreign_allocation(i)))
            .await
            .expect("allocation written");
        direct.push(until_allocated(&claims, &name, start).await);
    }
    ours.sort();
    direct.sort();
    (ours, direct)
}

/// The `p` quantile of sorted `values`.
pub fn at(values: &[Duration], p: f64) -> Duration {
    values[((values.len() as f64 * p).ceil() as usize).clamp(1, values.len()) - 1]
}
