//! `make bench`: how long a Pod that asks for a GPU as an extended resource takes to start on the
//! real node with the chart's webhook installed (issue 31, deliverable 1). The same Pod, one H100
//! as `gpu.deckhouse.io/<class>: 1`, is run alternately with the best-fit class `h100` of
//! docs/examples and with a `FirstFit` twin of it (whose Pods the webhook never gates): the
//! baseline, from the same run. Each Pod's time is from just before its create call to the first
//! poll (every 50 ms) that sees it Running; it is deleted, and its claim gone, before the next.
//! Prints the median and the slowest of both, and their ratio (goal: at most 1.2).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use support::*;
use testbed::{Progress, wait_until};

const ROUNDS: usize = 10;
const FIRST_FIT_CLASS: &str = "rn-bench-h100-first-fit";

/// The workload Pod asking for one GPU of `class` as an extended resource; it sleeps until deleted.
fn extended_resource_pod(name: &str, class: &str) -> serde_json::Value {
    let mut pod = workload_pod(name, "sleep 3600", &[], &[]);
    pod["spec"]["containers"][0]["resources"] = json!({"limits": {format!("gpu.deckhouse.io/{class}"): "1"}});
    pod
}

/// Creation to Running of one Pod of `class`; the Pod and its claim are gone when this returns.
async fn start_once(client: &kube::Client, ns: &str, name: &str, class: &str) -> Duration {
    let pods = Api::<Pod>::namespaced(client.clone(), ns);
    let created = Instant::now();
    create_pod(client, ns, &extended_resource_pod(name, class)).await;
    let took = loop {
        let pod = pods.get(name).await.unwrap();
        if pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
            break created.elapsed();
        }
        assert!(
            created.elapsed() < POD_DONE,
            "Pod {name} not Running: {}",
            describe(&pod)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    pods.delete(name, &DeleteParams::default()).await.unwrap();
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), ns);
    wait_until(&format!("Pod {name} and its claim gone"), POD_DONE, || {
        let (pods, claims) = (pods.clone(), claims.clone());
        async move {
            let left = claims.list(&ListParams::default()).await?.items.len();
            Ok(match (pods.get_opt(name).await?, left) {
                (None, 0) => Progress::Done(()),
                (pod, left) => Progress::Pending(format!("Pod there: {}, claims {left}", pod.is_some())),
            })
        }
    })
    .await
    .unwrap();
    took
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median_and_max(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    (times[times.len() / 2], times[times.len() - 1])
}

#[tokio::main]
async fn main() {
    let (_, client) = node_with_example_classes().await;
    let first_fit = json!({"apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "GPUClass",
        "metadata": {"name": FIRST_FIT_CLASS},
        "spec": {"vendor": "Nvidia", "deviceType": "Physical", "allocationPolicy": "FirstFit",
            "selector": {"matchLabels": {"gpu.deckhouse.io/device": "h100-sxm5-80gb"}}}});
    apply(&client, &first_fit).await;
    wait_device_class(&client, FIRST_FIT_CLASS).await;
    let ns = namespace(&client, "bench-ext-res").await;
    let (mut best_fit, mut baseline) = (vec![], vec![]);
    // Alternate, so that a drift of the machine's load weighs on both alike.
    for round in 0..ROUNDS {
        baseline.push(start_once(&client, &ns, &format!("first-fit-{round}"), FIRST_FIT_CLASS).await);
        best_fit.push(start_once(&client, &ns, &format!("best-fit-{round}"), "h100").await);
    }
    let (base_median, base_max) = median_and_max(baseline);
    let (median, max) = median_and_max(best_fit);
    println!(
        "extended-resource Pod, creation to Running on the real node ({ROUNDS} each): class h100 (best fit, webhook installed) median {:.0} ms, slowest {:.0} ms; FirstFit class median {:.0} ms, slowest {:.0} ms; ratio of medians {:.2} (goal <= 1.2)",
        ms(median),
        ms(max),
        ms(base_median),
        ms(base_max),
        median.as_secs_f64() / base_median.as_secs_f64()
    );
    delete_namespace(&client, &ns).await;
    delete_object(&client, &first_fit).await;
}
