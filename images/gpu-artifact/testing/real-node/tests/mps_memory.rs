//! MPS shares that ask for `memory` on the real node (kube-scheduler, kubelet, containerd, the
//! handler's CDI specs): the container of a share that asked for 4Gi gets
//! `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=<card UUID>=4096M`, the limit NVIDIA's MPS client enforces
//! (node-prepare `mps_memory_limit` cites the documentation); a second share of the card that asks
//! more memory than is left stays Pending with the kube-scheduler's reason although its
//! sharePercent fits, and runs with its own limit once the first share's memory is free again.
//! Both go through a `FirstFit` class, so no gate is lifted: the scheduler does the counting.

mod support;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceRequestAllocationResult, ResourceClaim};
use kube::api::DeleteParams;
use kube::{Api, Client};
use serde_json::json;
use support::module::wait_module_ready;
use support::*;
use testbed::{Progress, wait_until};

/// A `FirstFit` MPS class: the kube-scheduler allocates its claims, no gate.
const CLASS: &str = "rn-mps-memory-first-fit";

/// MPS allowed on `node`, and a claim of 25% of an H100 (the one with `uuid`, if given) and `memory`
/// of its memory, through [`CLASS`].
async fn share_with_memory(client: &Client, node: &str, namespace: &str, name: &str, uuid: Option<&str>, memory: &str) {
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {"gpu.deckhouse.io/allow-mps": "true"}}}),
    )
    .await;
    let card = match uuid {
        Some(uuid) => format!("device.attributes[\"gpu.deckhouse.io\"].uuid == \"{uuid}\""),
        None => "device.attributes[\"gpu.deckhouse.io\"].device == \"h100-sxm5-80gb\"".to_owned(),
    };
    let capacity = [("sharePercent", "25"), ("memory", memory)];
    share_claim(client, namespace, name, CLASS, &card, &capacity).await;
}

/// Waits until the kube-scheduler gave up on Pod `name` for now, and returns its reason.
async fn unschedulable(client: &Client, namespace: &str, name: &str) -> String {
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    wait_until(&format!("Pod {namespace}/{name} unschedulable"), POD_DONE, || {
        let pods = pods.clone();
        async move {
            let pod = pods.get(name).await?;
            let conditions = pod.status.and_then(|s| s.conditions).unwrap_or_default();
            let scheduled = conditions.into_iter().find(|c| c.type_ == "PodScheduled");
            Ok(match scheduled {
                Some(c) if c.status == "False" && c.reason.as_deref() == Some("Unschedulable") => {
                    Progress::Done(c.message.unwrap_or_default())
                }
                other => Progress::Pending(format!("{other:?}")),
            })
        }
    })
    .await
    .unwrap()
}

const SHOW_LIMIT: &str = "echo \"limit=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT\"; echo LIMIT-SHOWN; sleep 3600";

#[tokio::test]
async fn an_mps_share_gets_the_memory_it_asked_as_its_limit_and_one_past_the_card_waits() {
    let _cards = CARDS.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    let ns = namespace(&client, "mps-memory").await;
    let class = first_fit_mps_class(&client, CLASS).await;

    // A: 4Gi of an H100; its container is given exactly 4096 MiB on that card.
    share_with_memory(&client, &node.name, &ns, "a", None, "4Gi").await;
    create_pod(&client, &ns, &workload_pod("a", SHOW_LIMIT, &[("gpu", "a")], &[])).await;
    wait_phase(&client, &ns, "a", "Running").await;
    let uuid = allocated_uuids(&client, &ns, "a").await[0].1.clone();
    let consumed = allocation_results(&client, &ns, "a").await[0].consumed_capacity.clone();
    let out = wait_logged(&client, &ns, "a").await;
    assert!(
        out.lines().any(|l| l == format!("limit={uuid}=4096M")),
        "A's container carries the limit for 4096 MiB on card {uuid}: {out} (consumed {consumed:?})"
    );

    // B: 25% more of the same card fits, its memory (all that is left and 1 MiB more) does not.
    let card_mib = offered_memory_mib(&client, &allocation_results(&client, &ns, "a").await[0]).await;
    let past_mib = card_mib - 4096 + 1;
    let past = format!("{past_mib}Mi");
    share_with_memory(&client, &node.name, &ns, "b", Some(&uuid), &past).await;
    create_pod(&client, &ns, &workload_pod("b", SHOW_LIMIT, &[("gpu", "b")], &[])).await;
    let reason = unschedulable(&client, &ns, "b").await;
    assert!(reason.contains("cannot allocate all claims"), "{reason}");
    assert!(
        allocation_results_now(&client, &ns, "b").await.is_empty(),
        "B's claim is not allocated"
    );

    // Once A's Pod is gone its claim is deallocated, and B's memory fits the card.
    Api::<Pod>::namespaced(client.clone(), &ns)
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    wait_phase(&client, &ns, "b", "Running").await;
    let out = wait_logged(&client, &ns, "b").await;
    let expected = format!("limit={uuid}={past_mib}M");
    assert!(out.lines().any(|l| l == expected), "{expected}: {out}");

    delete_namespace(&client, &ns).await;
    delete_object(&client, &class).await;
    wait_no_mps_left(node, "after the claims of this test").await;
}

/// What Pod `name` printed once it showed its limit.
async fn wait_logged(client: &Client, namespace: &str, name: &str) -> String {
    wait_until(
        &format!("Pod {namespace}/{name} showed its limit"),
        POD_DONE,
        || async move {
            Ok(match try_logs(client, namespace, name).await {
                Ok(out) if out.contains("LIMIT-SHOWN") => Progress::Done(out),
                Ok(out) => Progress::Pending(out),
                Err(error) => Progress::Pending(error.to_string()),
            })
        },
    )
    .await
    .unwrap()
}

/// The claim's allocation results as they are now (empty when it is not allocated).
async fn allocation_results_now(client: &Client, namespace: &str, name: &str) -> Vec<DeviceRequestAllocationResult> {
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), namespace);
    let claim = claims.get(name).await.unwrap();
    claim
        .status
        .and_then(|s| s.allocation)
        .and_then(|a| a.devices)
        .and_then(|d| d.results)
        .unwrap_or_default()
}

/// The memory the shared offer of `result` publishes, in MiB (bytes, as dra-offers writes it).
async fn offered_memory_mib(client: &Client, result: &DeviceRequestAllocationResult) -> u64 {
    let memory = published_device(&resource_slices(client).await, result)
        .and_then(|d| d.capacity)
        .and_then(|c| c.get("gpu.deckhouse.io/memory").map(|m| m.value.0.clone()))
        .unwrap_or_default();
    memory
        .parse::<u64>()
        .map(|bytes| bytes >> 20)
        .unwrap_or_else(|_| panic!("{}: memory {memory:?}", result.device))
}
