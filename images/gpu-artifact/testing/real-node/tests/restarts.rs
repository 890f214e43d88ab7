//! Restarts on the real node, one at a time (each takes the node's components down):
//! - gpu-handler's Pod deleted while claims are prepared: the DaemonSet's new Pod registers again,
//!   every prepared claim survives (checkpoint, CDI spec, running containers keep their devices) and
//!   unprepare still works;
//! - the kubelet process restarted: it finds the plugin again, running Pods keep their devices, a new
//!   claim is prepared;
//! - a reboot (new boot id): what the checkpoint says cannot survive one is dropped and the devices
//!   are made again for the Pods the kubelet starts again.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use serde_json::json;
use support::module::wait_module_ready;
use support::*;
use testbed::{Progress, wait_until};

/// A Pod that prints what it sees every second, so its log shows it kept its devices.
const WATCH_GPUS: &str = "while true; do echo \"tick $(date +%s) $(nvidia-smi -L | tr '\\n' '|')\"; sleep 1; done";

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A restarted kubelet serves a Pod's log only once it has synced the Pod again, and it syncs no
/// Pod until its container runtime status check has passed ("Skipping pod synchronization"). On
/// two cores loaded by other builds that took over 80 s, and once the log answered 404 for all of
/// the 90 s this wait used to allow.
const KUBELET_RESYNC: Duration = Duration::from_secs(240);

/// Waits until the Pod's log has a tick newer than `after` listing `expect`.
async fn still_sees(client: &kube::Client, ns: &str, pod: &str, after: u64, expect: &str) {
    wait_until(
        &format!("{ns}/{pod} to list {expect} after {after}"),
        KUBELET_RESYNC,
        || async {
            let log = match try_logs(client, ns, pod).await {
                Ok(log) => log,
                Err(error) => return Ok(Progress::Pending(format!("no log: {error}"))),
            };
            let found = log.lines().rev().find_map(|l| {
                let rest = l.strip_prefix("tick ")?;
                let (time, seen) = rest.split_once(' ')?;
                (time.parse::<u64>().ok()? > after).then(|| seen.to_owned())
            });
            Ok(match found {
                Some(seen) if seen.contains(expect) => Progress::Done(()),
                other => Progress::Pending(format!("last tick: {other:?}")),
            })
        },
    )
    .await
    .unwrap();
}

async fn long_running(client: &kube::Client, ns: &str, name: &str, claim_name: &str) -> String {
    let mut pod = workload_pod(name, WATCH_GPUS, &[("gpu", claim_name)], &[]);
    pod["spec"]["restartPolicy"] = json!("Always");
    create_pod(client, ns, &pod).await;
    wait_phase(client, ns, name, "Running").await;
    let uuid = allocated_uuids(client, ns, claim_name).await.remove(0).1;
    still_sees(client, ns, name, 0, &uuid[..12]).await;
    uuid
}

#[tokio::test]
async fn handler_pod_deleted_while_claims_are_prepared() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    let ns = namespace(&client, "handler-restart").await;
    claim(&client, &ns, "whole", "h100", 1, None).await;
    claim(&client, &ns, "part", "mig-2g12gb", 1, None).await;
    let whole = long_running(&client, &ns, "whole", "whole").await;
    long_running(&client, &ns, "part", "part").await;
    let uids = [
        claim_uid(&client, &ns, "whole").await,
        claim_uid(&client, &ns, "part").await,
    ];
    let before = checkpoint(node);
    let specs = cdi_specs(node);
    println!("before: claims {:?}, CDI specs {specs:?}", claim_uids(&before));
    for uid in &uids {
        assert!(
            specs.contains(&spec_of(uid)),
            "claim {uid} has its CDI spec on the node: {specs:?}"
        );
    }
    // This test's claims' specs: those of an earlier test's claims may still be going (the kubelet
    // unprepares a claim after its Pod's object is gone), which is no restart's doing.
    let own_specs = |specs: Vec<String>| -> Vec<String> {
        specs
            .into_iter()
            .filter(|s| uids.iter().any(|u| *s == spec_of(u)))
            .collect()
    };
    let specs = own_specs(specs);

    let deleted_at = delete_handler_pod(&client).await;
    let after = checkpoint(node);
    for uid in &uids {
        assert!(
            claim_uids(&after).contains(uid),
            "claim {uid} survives in the checkpoint: {after}"
        );
    }
    assert_eq!(own_specs(cdi_specs(node)), specs, "the CDI specs survive");
    still_sees(&client, &ns, "whole", deleted_at, &whole[..12]).await;
    println!(
        "after: claims {:?}, CDI specs {:?}",
        claim_uids(&after),
        cdi_specs(node)
    );

    // Unprepare still works: the Pods and claims go, so do their specs and checkpoint entries.
    delete_namespace(&client, &ns).await;
    wait_until("the claims unprepared", Duration::from_secs(120), || async {
        let left: Vec<String> = claim_uids(&checkpoint(node))
            .into_iter()
            .filter(|u| uids.contains(u))
            .collect();
        let specs = own_specs(cdi_specs(node));
        Ok(if left.is_empty() && specs.is_empty() {
            Progress::Done(())
        } else {
            Progress::Pending(format!("checkpoint {left:?}, specs {specs:?}"))
        })
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn kubelet_restarted_running_pods_keep_their_devices() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    let ns = namespace(&client, "kubelet-restart").await;
    claim(&client, &ns, "before", "h100", 1, None).await;
    let uuid = long_running(&client, &ns, "before", "before").await;
    node.step("restart-kubelet").unwrap();
    let restarted = now();
    still_sees(&client, &ns, "before", restarted, &uuid[..12]).await;
    // The new kubelet found the plugin again: a claim made now is prepared for a new Pod.
    claim(&client, &ns, "after", "h100", 1, None).await;
    let script = format!("{SHOW_GPUS}; sleep 2");
    create_pod(&client, &ns, &workload_pod("after", &script, &[("gpu", "after")], &[])).await;
    let given = allocated_uuids(&client, &ns, "after").await.remove(0).1;
    let out = finish_run(&client, &ns, "after").await;
    assert!(
        out.contains(&given),
        "the Pod made after the restart lists its card {given}: {out}"
    );
    let pod = Api::<Pod>::namespaced(client.clone(), &ns).get("before").await.unwrap();
    let restarts = pod.status.unwrap().container_statuses.unwrap()[0].restart_count;
    assert_eq!(restarts, 0, "the running container was not restarted");
    delete_namespace(&client, &ns).await;
}

#[tokio::test]
async fn a_reboot_drops_what_cannot_survive_it() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (node, client) = node().await;
    wait_module_ready(&client).await.unwrap();
    apply_example_device_classes(&client).await;
    let ns = namespace(&client, "reboot").await;
    claim(&client, &ns, "part", "mig-2g12gb", 1, None).await;
    long_running(&client, &ns, "part", "part").await;
    let uid = claim_uid(&client, &ns, "part").await;
    let before = checkpoint(node);
    let boot_before = before["bootId"].as_str().unwrap_or_default().to_owned();
    let mig_before = before["claims"][&uid].to_string();
    println!("before the reboot: boot id {boot_before}, claim {mig_before}");

    node.step("reboot").unwrap();
    let rebooted = now();
    let nodes = Api::<Node>::all(client.clone());
    // The rebooted kubelet registers again only after cAdvisor's recovery, about 3 s for each
    // container of the last boot ("Failed to create existing container"): 70-100 s with the module's
    // and earlier tests' Pods, more on two loaded cores.
    let boot_after = wait_until("the Node to report a new boot id", KUBELET_RESYNC, || async {
        let id = nodes
            .get(&node.name)
            .await?
            .status
            .and_then(|s| s.node_info)
            .map(|i| i.boot_id)
            .unwrap_or_default();
        Ok(if !id.is_empty() && id != boot_before {
            Progress::Done(id)
        } else {
            Progress::Pending(id)
        })
    })
    .await
    .unwrap();
    wait_module_ready(&client).await.unwrap();
    // The kubelet starts the Pod again; the claim is prepared again in this boot: a new MIG device.
    wait_until(
        "the claim prepared again under the new boot id",
        Duration::from_secs(180),
        || async {
            let now = checkpoint(node);
            Ok(
                if now["bootId"] == boot_after.as_str() && now["claims"].get(&uid).is_some() {
                    Progress::Done(())
                } else {
                    Progress::Pending(now.to_string())
                },
            )
        },
    )
    .await
    .unwrap();
    let after = checkpoint(node);
    println!(
        "after the reboot: boot id {boot_after}, claim {}",
        after["claims"][&uid]
    );
    assert_ne!(
        after["claims"][&uid].to_string(),
        mig_before,
        "the MIG device was made again"
    );
    still_sees(&client, &ns, "part", rebooted, "MIG 2g.12gb").await;
    delete_namespace(&client, &ns).await;
}
