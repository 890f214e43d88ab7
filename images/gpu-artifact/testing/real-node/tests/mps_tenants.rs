//! Tenants of one MPS card on the real node (kubelet, containerd, the handler's tmpfs and the
//! stand-in MPS daemon): a card's `/dev/shm` is a tmpfs of the configured size (the chart's default,
//! 1 GiB), a tenant that fills it gets ENOSPC in its container while the node goes on preparing, a
//! second namespace's MPS claim on the card is refused with a reason that does not name the first,
//! and once the first namespace's claims are gone the second gets a fresh `/dev/shm` without the
//! first one's files; after the last claim the card's directory and tmpfs are gone from the node.

mod support;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use support::module::wait_module_ready;
use support::*;
use testbed::{Progress, wait_until};

/// The refusal a second namespace's MPS claim gets (checks::shares in node-prepare).
const OTHER_NAMESPACE: &str = "another namespace's MPS clients use card";

/// A `FirstFit` MPS class for tenant B's share: its Pod is not gated, so the kube-scheduler allocates
/// the card and the node's refusal is what keeps the tenants apart (gpu-dra-controller keeps such a
/// claim off the card, and its Pod would wait, not be refused).
const SCHEDULER_MPS_CLASS: &str = "rn-mps-tenants-first-fit";

/// A claim in `namespace` of `percent` of the card with `uuid`, through MPS, of `class`.
async fn share_of_card(client: &Client, namespace: &str, name: &str, class: &str, uuid: &str, percent: u32) {
    let selector = format!("device.attributes[\"gpu.deckhouse.io\"].uuid == \"{uuid}\"");
    let percent = percent.to_string();
    share_claim(client, namespace, name, class, &selector, &[("sharePercent", &percent)]).await;
}

/// Waits until Pod `name` printed `marker`, and returns what it printed.
async fn wait_printed(client: &Client, namespace: &str, name: &str, marker: &str) -> String {
    wait_until(
        &format!("Pod {namespace}/{name} printed {marker}"),
        POD_DONE,
        || async move {
            Ok(match try_logs(client, namespace, name).await {
                Ok(out) if out.contains(marker) => Progress::Done(out),
                Ok(out) => Progress::Pending(out),
                Err(error) => Progress::Pending(error.to_string()),
            })
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn mps_tenants_get_a_private_size_limited_shm_and_a_card_serves_one_namespace() {
    let _cards = CARDS.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    // The node's MPS directories are counted below: an earlier test's shares must be gone.
    wait_no_mps_left(node, "before the tenants").await;
    let tenant_a = namespace(&client, "mps-a").await;
    let tenant_b = namespace(&client, "mps-b").await;

    // Tenant A writes a file and fills its /dev/shm, then stays.
    mps_share_claim(&client, &node.name, &tenant_a, "a", 50).await;
    let fill = "echo secret > /dev/shm/tenant-a; dd if=/dev/zero of=/dev/shm/fill bs=1M count=1100 2>&1; \
        echo \"dd exit $?\"; df -k /dev/shm | tail -1; echo FILLED; sleep 3600";
    create_pod(&client, &tenant_a, &workload_pod("a", fill, &[("gpu", "a")], &[])).await;
    let out = wait_printed(&client, &tenant_a, "a", "FILLED").await;
    assert!(
        out.contains("No space left on device") && out.contains("dd exit 1"),
        "{out}"
    );
    let df: Vec<&str> = out
        .lines()
        .find(|l| l.ends_with(" /dev/shm"))
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(df.get(1), Some(&"1048576"), "a 1 GiB /dev/shm: {out}");
    let uuid = allocated_uuids(&client, &tenant_a, "a").await[0].1.clone();
    assert!(!uuid.is_empty(), "the card of A's share has a UUID");
    let cards = node.files().list(MPS_DIR).unwrap();
    assert_eq!(cards.len(), 1, "one card's MPS directory: {cards:?}");
    let shm = format!("{MPS_DIR}/{}/shm", cards[0]);
    let mounts = mps_mounts(node);
    assert!(
        mounts
            .iter()
            .any(|(point, kind, options)| *point == shm && kind == "tmpfs" && options.contains("size=1048576k")),
        "the card's shm is a 1 GiB tmpfs on the node, not its disk: {mounts:?}"
    );

    // The node goes on preparing: another claim of tenant A on the same card, which sees A's files.
    share_of_card(&client, &tenant_a, "a2", "gpu-mps", &uuid, 25).await;
    let out = run_to_end(
        &client,
        &tenant_a,
        &workload_pod("a2", "ls /dev/shm", &[("gpu", "a2")], &[]),
    )
    .await;
    assert!(
        out.lines().any(|l| l == "tenant-a"),
        "one namespace's clients share the card's shm: {out}"
    );

    // Tenant B's share of the same card, allocated by the kube-scheduler, is refused by the node while
    // A's clients use it, without naming A.
    let first_fit = first_fit_mps_class(&client, SCHEDULER_MPS_CLASS).await;
    share_of_card(&client, &tenant_b, "b", SCHEDULER_MPS_CLASS, &uuid, 25).await;
    let script = "echo '## shm'; ls /dev/shm; echo '## pipe'; ls -l /tmp/nvidia-mps; echo '## end'";
    create_pod(&client, &tenant_b, &workload_pod("b", script, &[("gpu", "b")], &[])).await;
    let events = Api::<Event>::namespaced(client.clone(), &tenant_b);
    let refusal = wait_until("the refusal of B's share in B's Events", POD_DONE, || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await?;
            let messages: Vec<String> = list.items.into_iter().filter_map(|e| e.message).collect();
            Ok(match messages.iter().find(|m| m.contains(OTHER_NAMESPACE)) {
                Some(found) => Progress::Done(found.clone()),
                None => Progress::Pending(format!("{messages:?}")),
            })
        }
    })
    .await
    .unwrap();
    assert!(
        !refusal.contains(&*tenant_a),
        "the refusal names no other namespace: {refusal}"
    );

    // A's Pods go; B's share is prepared on a fresh shm: the daemon's segment, none of A's files.
    Api::<Pod>::namespaced(client.clone(), &tenant_a)
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    let out = finish_run(&client, &tenant_b, "b").await;
    let listed = section(&out, "shm");
    assert!(
        !listed.contains(&"tenant-a") && !listed.contains(&"fill"),
        "A's files are gone: {out}"
    );
    assert!(
        listed.iter().any(|l| l.starts_with("cuda.shm.mps-control.")),
        "B meets the daemon in its shm: {out}"
    );
    assert!(
        section(&out, "pipe")
            .iter()
            .any(|l| l.starts_with('p') && l.ends_with("control")),
        "B reaches the daemon's pipe: {out}"
    );

    // After the last claim the card's directory and its tmpfs are gone from the node.
    delete_namespace(&client, &tenant_a).await;
    delete_namespace(&client, &tenant_b).await;
    delete_object(&client, &first_fit).await;
    wait_no_mps_left(node, "after the last claim").await;
}
