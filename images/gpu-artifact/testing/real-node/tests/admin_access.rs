//! Admin access on the real node: a Pod in a namespace labelled
//! `resource.kubernetes.io/admin-access: "true"` whose claim asks for `allocationMode: All` with
//! `adminAccess: true` runs beside the Pods that hold the same cards, sees every card of its class
//! (`nvidia-smi -L` through NVML inside the container), creates no MIG instance and changes no MIG
//! mode (the mock NVML's state on the node), and leaves the other claims as they were: their
//! checkpoint entries and CDI specs unchanged while it runs and after it is gone.
//!
//! Which devices an admin can reach is the scheduler's rule (the Go allocator, `allocateDevice`):
//! admin access skips only the check that the device is free; the counters of a device that
//! consumes them are still charged. So the monitoring class here is a shared offer (MPS), whose
//! shares leave its counters to the one offer, not a whole card another Pod holds.

mod support;

use serde_json::{Value, json};
use support::*;
use testbed::{Progress, wait_until};

const H100: &str = "device.attributes[\"gpu.deckhouse.io\"].device == \"h100-sxm5-80gb\"";
const A30: &str = "device.attributes[\"gpu.deckhouse.io\"].device == \"a30-pcie\"";

/// A namespace whose claims may ask for admin access (the API server refuses `adminAccess`
/// elsewhere).
async fn admin_namespace(client: &kube::Client, test: &str) -> TestNamespace {
    let ns = namespace(client, test).await;
    apply(
        client,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": &*ns,
            "labels": {"resource.kubernetes.io/admin-access": "true"}}}),
    )
    .await;
    ns
}

/// Claim `name` of every device of `class` matching `selector`, with admin access; a shared offer
/// is asked for `sharePercent` 1, the least a share may take beside the Pods' shares.
async fn admin_claim(client: &kube::Client, ns: &str, name: &str, class: &str, selector: &str, shared: bool) {
    let mut exactly = json!({"deviceClassName": class, "allocationMode": "All", "adminAccess": true,
        "selectors": [{"cel": {"expression": selector}}]});
    if shared {
        exactly["capacity"] = json!({"requests": {"gpu.deckhouse.io/sharePercent": "1"}});
    }
    apply(
        client,
        &json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
    )
    .await;
}

/// The checkpoint entries of `uids` and their CDI specs' text, as the node has them now.
fn held_state(node: &real_node::node::RealNode, uids: &[String]) -> Vec<(Value, String)> {
    let checkpoint = checkpoint(node);
    uids.iter()
        .map(|uid| {
            let spec = node
                .files()
                .read_to_string(&format!("{CDI_DIR}/{}", spec_of(uid)))
                .unwrap();
            (checkpoint["claims"][uid].clone(), spec)
        })
        .collect()
}

/// Starts Pod `name` of the admin's claim `name`; what it printed once it has shown what it sees.
/// It stays running, so the node's state is read while its claim is prepared.
async fn watch(client: &kube::Client, ns: &str, name: &str) -> String {
    let script = format!("{SHOW_GPUS}; echo '## done'; sleep 3600");
    create_pod(client, ns, &workload_pod(name, &script, &[("gpu", name)], &[])).await;
    wait_phase(client, ns, name, "Running").await;
    let out = wait_until(&format!("{ns}/{name} printed what it sees"), POD_DONE, || async move {
        let out = logs(client, ns, name).await;
        Ok(if out.contains("## done") {
            Progress::Done(out)
        } else {
            Progress::Pending(out)
        })
    })
    .await
    .unwrap();
    println!("--- {ns}/{name} printed:\n{out}---");
    out
}

/// The whole-card offers (`gpu<i>`) of H100s the node publishes now.
async fn whole_card_offers(client: &kube::Client) -> Vec<String> {
    let slices = kube::Api::<k8s_openapi::api::resource::v1::ResourceSlice>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    slices
        .items
        .into_iter()
        .flat_map(|s| s.spec.devices.unwrap_or_default())
        .filter(|d| d.name.strip_prefix("gpu").is_some_and(|i| i.parse::<u32>().is_ok()))
        .filter(|d| {
            let device = d.attributes.as_ref().and_then(|a| a.get("gpu.deckhouse.io/device"));
            device.and_then(|v| v.string.as_deref()) == Some("h100-sxm5-80gb")
        })
        .map(|d| d.name)
        .collect()
}

/// Waits until the node has no checkpoint entry and no CDI spec of claim `uid`.
async fn unprepared(node: &real_node::node::RealNode, uid: &str) {
    wait_until(&format!("claim {uid} unprepared"), POD_DONE, || async move {
        let uids = claim_uids(&checkpoint(node));
        let specs = cdi_specs(node);
        Ok(if uids.iter().any(|u| u == uid) || specs.contains(&spec_of(uid)) {
            Progress::Pending(format!("checkpoint {uids:?}, specs {specs:?}"))
        } else {
            Progress::Done(())
        })
    })
    .await
    .unwrap();
}

/// A Pod that holds claim `claim` until the test ends.
async fn holder(client: &kube::Client, ns: &str, claim: &str) {
    let mut pod = workload_pod(claim, "sleep 3600", &[("gpu", claim)], &[]);
    pod["spec"]["restartPolicy"] = json!("Always");
    create_pod(client, ns, &pod).await;
    wait_phase(client, ns, claim, "Running").await;
}

#[tokio::test]
async fn an_admin_pod_sees_every_card_of_its_class_beside_the_pods_that_hold_them() {
    let _cards = CARDS.lock().await;
    let (node, client) = node_with_example_classes().await;
    let users = namespace(&client, "admin-users").await;
    // 40% each: a card whose shares use up its sharePercent has no room for the admin's share, and
    // upstream's `All` leaves such a device out (experimental allocator: `allDevices` keeps only
    // devices where `CmpRequestOverCapacity` fits).
    mps_share_claim(&client, &node.name, &users, "half-a", 40).await;
    mps_share_claim(&client, &node.name, &users, "half-b", 40).await;
    holder(&client, &users, "half-a").await;
    holder(&client, &users, "half-b").await;
    let held: Vec<String> = [
        claim_uid(&client, &users, "half-a").await,
        claim_uid(&client, &users, "half-b").await,
    ]
    .into();
    let before = held_state(node, &held);
    let mig_before = mig_state(node);

    let admins = admin_namespace(&client, "admin-monitor").await;
    admin_claim(&client, &admins, "monitor", "gpu-mps", H100, true).await;
    let out = watch(&client, &admins, "monitor").await;
    let results = allocation_results(&client, &admins, "monitor").await;
    let mut given: Vec<String> = allocated_uuids(&client, &admins, "monitor")
        .await
        .into_iter()
        .map(|(_, uuid)| uuid)
        .collect();
    let admin_uid = claim_uid(&client, &admins, "monitor").await;

    let (gpus, migs) = (gpu_lines(&out), mig_lines(&out));
    assert_eq!(gpus.len(), 8, "every H100 of the class: {out}");
    assert!(gpus.iter().all(|l| l.contains("H100")), "{out}");
    assert!(migs.is_empty(), "{out}");
    let mut seen: Vec<String> = gpus
        .iter()
        .map(|l| l.split("(UUID: ").nth(1).unwrap().trim_end_matches(')').to_owned())
        .collect();
    seen.sort();
    given.sort();
    assert_eq!(seen, given, "nvidia-smi lists exactly the claim's cards");
    assert!(results.iter().all(|r| r.admin_access == Some(true)), "{results:?}");
    let users_cards: Vec<String> = allocated_uuids(&client, &users, "half-a")
        .await
        .into_iter()
        .chain(allocated_uuids(&client, &users, "half-b").await)
        .map(|(_, uuid)| uuid)
        .collect();
    assert!(
        users_cards.iter().all(|uuid| seen.contains(uuid)),
        "the cards the Pods hold are among the admin's: {users_cards:?} in {seen:?}"
    );
    assert_eq!(
        held_state(node, &held),
        before,
        "the holders' entries and specs while the admin runs"
    );
    // It holds nothing, so the node keeps offering what the admin's cards can still give: every
    // H100 no Pod shares is still offered whole.
    let whole = whole_card_offers(&client).await;
    let shared_by_pods: std::collections::BTreeSet<&String> = users_cards.iter().collect();
    assert_eq!(
        whole.len(),
        8 - shared_by_pods.len(),
        "whole-card offers while the admin runs: {whole:?}"
    );
    assert!(
        checkpoint(node)["claims"][&admin_uid]["devices"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["adminAccess"] == json!(true)),
        "{}",
        checkpoint(node)["claims"][&admin_uid]
    );

    delete_namespace(&client, &admins).await;
    unprepared(node, &admin_uid).await;
    assert_eq!(
        held_state(node, &held),
        before,
        "the holders' entries and specs after the admin left"
    );
    assert_eq!(mig_state(node), mig_before, "no MIG instance or mode change");
    for pod in ["half-a", "half-b"] {
        wait_phase(&client, &users, pod, "Running").await;
    }
    delete_namespace(&client, &users).await;
}

#[tokio::test]
async fn an_admin_pod_on_mig_offers_makes_no_instance_and_sees_the_card() {
    let _cards = CARDS.lock().await;
    let (node, client) = node_with_example_classes().await;
    let before = mig_state(node);
    let admins = admin_namespace(&client, "admin-mig").await;
    admin_claim(&client, &admins, "mig-monitor", "mig-2g12gb", A30, false).await;
    let out = watch(&client, &admins, "mig-monitor").await;
    let given = allocated_uuids(&client, &admins, "mig-monitor").await;
    assert!(
        given.len() >= 2 && given.iter().all(|(device, _)| device.contains("-mig-2g12gb-")),
        "every 2g.12gb placement of the A30: {given:?}"
    );
    let during = mig_state(node);

    let (gpus, migs) = (gpu_lines(&out), mig_lines(&out));
    assert_eq!(gpus.len(), 1, "the A30 itself: {out}");
    assert!(gpus[0].contains("A30") && gpus[0].contains(&given[0].1), "{out}");
    assert!(migs.is_empty(), "no MIG device was made for it: {out}");
    assert_eq!(during, before, "no MIG instance or mode change while it is prepared");
    let uid = claim_uid(&client, &admins, "mig-monitor").await;
    delete_namespace(&client, &admins).await;
    unprepared(node, &uid).await;
    assert_eq!(mig_state(node), before, "nor after it is gone");
}
