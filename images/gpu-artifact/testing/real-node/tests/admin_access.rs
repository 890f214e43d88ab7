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

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Api;
use serde_json::{Value, json};
use support::module::wait_module_ready;
use support::*;
use testbed::{Progress, wait_until};

const H100: &str = "device.attributes[\"gpu.deckhouse.io\"].device == \"h100-sxm5-80gb\"";
const A30: &str = "device.attributes[\"gpu.deckhouse.io\"].device == \"a30-pcie\"";

async fn ready() -> (&'static real_node::node::RealNode, kube::Client) {
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    (node, client)
}

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

/// The `GPU ...` lines of `nvidia-smi -L`, and the `MIG ...` lines.
fn listed(out: &str) -> (Vec<&str>, Vec<&str>) {
    let lines = section(out, "nvidia-smi -L");
    let gpus = lines.iter().copied().filter(|l| l.starts_with("GPU ")).collect();
    let migs = lines
        .iter()
        .copied()
        .filter(|l| l.trim_start().starts_with("MIG "))
        .collect();
    (gpus, migs)
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
    let (node, client) = ready().await;
    let users = namespace(&client, "admin-users").await;
    mps_share_claim(&client, &node.name, &users, "half-a", 50).await;
    mps_share_claim(&client, &node.name, &users, "half-b", 50).await;
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
    let script = format!("{SHOW_GPUS}; sleep 2");
    create_pod(
        &client,
        &admins,
        &workload_pod("monitor", &script, &[("gpu", "monitor")], &[]),
    )
    .await;
    let mut given: Vec<String> = allocated_uuids(&client, &admins, "monitor")
        .await
        .into_iter()
        .map(|(_, uuid)| uuid)
        .collect();
    let admin_uid = claim_uid(&client, &admins, "monitor").await;
    let out = finish_run(&client, &admins, "monitor").await;

    let (gpus, migs) = listed(&out);
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
    let claims = Api::<ResourceClaim>::namespaced(client.clone(), &admins);
    let results = claims.get("monitor").await.unwrap().status.unwrap().allocation.unwrap();
    let results = results.devices.unwrap().results.unwrap();
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
    wait_until("the admin's claim unprepared", POD_DONE, || {
        let admin_uid = admin_uid.clone();
        async move {
            let uids = claim_uids(&checkpoint(node));
            let specs = cdi_specs(node);
            Ok(if uids.contains(&admin_uid) || specs.contains(&spec_of(&admin_uid)) {
                Progress::Pending(format!("checkpoint {uids:?}, specs {specs:?}"))
            } else {
                Progress::Done(())
            })
        }
    })
    .await
    .unwrap();
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
    let (node, client) = ready().await;
    let before = mig_state(node);
    let admins = admin_namespace(&client, "admin-mig").await;
    admin_claim(&client, &admins, "mig-monitor", "mig-2g12gb", A30, false).await;
    // It stays until told, so the node's state is read while its claim is prepared.
    let script = format!("{SHOW_GPUS}; echo '## done'; while [ ! -e /tmp/go ]; do sleep 1; done");
    create_pod(
        &client,
        &admins,
        &workload_pod("mig-monitor", &script, &[("gpu", "mig-monitor")], &[]),
    )
    .await;
    let given = allocated_uuids(&client, &admins, "mig-monitor").await;
    assert!(
        given.len() >= 2 && given.iter().all(|(device, _)| device.contains("-mig-2g12gb-")),
        "every 2g.12gb placement of the A30: {given:?}"
    );
    wait_phase(&client, &admins, "mig-monitor", "Running").await;
    let out = wait_until("mig-monitor printed what it sees", POD_DONE, || {
        let (client, ns) = (client.clone(), admins.to_string());
        async move {
            let out = logs(&client, &ns, "mig-monitor").await;
            Ok(if out.contains("## done") {
                Progress::Done(out)
            } else {
                Progress::Pending(out)
            })
        }
    })
    .await
    .unwrap();
    let during = mig_state(node);

    let (gpus, migs) = listed(&out);
    assert_eq!(gpus.len(), 1, "the A30 itself: {out}");
    assert!(gpus[0].contains("A30") && gpus[0].contains(&given[0].1), "{out}");
    assert!(migs.is_empty(), "no MIG device was made for it: {out}");
    assert_eq!(during, before, "no MIG instance or mode change while it is prepared");
    assert_eq!(mig_state(node), before);
    delete_namespace(&client, &admins).await;
}
