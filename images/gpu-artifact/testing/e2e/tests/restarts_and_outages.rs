//! Restarts and outages under load (issue 17, item 3), on a control plane of this test alone: the
//! API server killed and restarted, etcd killed and restarted, every watch and connection dropped
//! at once (a proxy between the node's components and the API server cuts them), gpu-handler
//! killed while the kubelet is calling it, and the MPS control daemon killed (alone, and with the
//! handler). After each, within 10 s of the API being back, every component has resynced: the node
//! agent recreates a deleted PhysicalGPU, gpu-handler republishes the node's offers for a changed
//! label, and a new Pod is scheduled, prepared by the handler and seen by the kubelet; and nothing
//! is duplicated or lost: one PhysicalGPU per card, each device once in the node's slices, each
//! prepared claim once in the checkpoint with its one MIG instance. The times are printed as the
//! outage table.

mod handler_node;
mod outages;
mod plugin_node;
mod support;

use std::time::{Duration, Instant};

use gpu_api::PhysicalGPU;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use outages::*;
use serde_json::json;
use support::*;
use testbed::{Progress, TestCluster, wait_until};

/// How long until `done` holds, from `since`; fails past `deadline` with what it last saw.
async fn resync_time<F, Fut>(what: &str, since: Instant, deadline: Duration, done: F) -> f64
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Progress<()>, anyhow::Error>>,
{
    let left = deadline.saturating_sub(since.elapsed());
    wait_until(what, left, done).await.unwrap();
    since.elapsed().as_secs_f64()
}

/// The three probes after an outage; returns their times from `back`.
async fn probe(bed: &Bed, back: Instant, pod: &str, resync: &mut Resync) {
    // The node agent: a deleted PhysicalGPU comes back from its watch.
    let gpus = Api::<PhysicalGPU>::all(bed.admin());
    let _ = gpus.delete(&bed.gpu_name(), &DeleteParams::default()).await;
    let name = bed.gpu_name();
    let agent = resync_time("the agent recreates its PhysicalGPU", back, RESYNC_DEADLINE, || async {
        Ok(match gpus.get_opt(&name).await? {
            Some(gpu) if gpu.metadata.deletion_timestamp.is_none() => Progress::Done(()),
            other => Progress::Pending(format!("{:?}", other.map(|g| g.metadata.uid))),
        })
    })
    .await;
    resync.seconds.insert("agent", agent);
    bed.set_driver_ready().await;
    // gpu-handler: a Node label that switches MIG offers off is followed, and back on.
    let nodes = Api::<Node>::all(bed.admin());
    let label =
        |value: Option<&str>| Patch::Merge(json!({"metadata": {"labels": {"gpu.deckhouse.io/allow-mig": value}}}));
    nodes
        .patch(bed.node.name(), &PatchParams::default(), &label(Some("false")))
        .await
        .unwrap();
    let handler = resync_time(
        "the handler follows the Node's labels",
        back,
        RESYNC_DEADLINE,
        || async {
            let offered = bed.offered().await;
            Ok(if offered.iter().any(|d| d.contains("-mig-")) {
                Progress::Pending(format!("{offered:?}"))
            } else {
                Progress::Done(())
            })
        },
    )
    .await;
    resync.seconds.insert("handler", handler);
    nodes
        .patch(bed.node.name(), &PatchParams::default(), &label(None))
        .await
        .unwrap();
    // Scheduler, kubelet and handler: a new Pod is prepared.
    let ns = bed.ns.name().to_owned();
    create(&bed.ns.api::<Pod>(), &templated_pod(pod, bed.node.name(), "mig")).await;
    let prepared = resync_time(&format!("{pod} prepared"), back, SCHEDULING_DEADLINE, || async {
        let offered = bed.offered().await;
        Ok(match bed.kubelet.prepared(&ns, pod) {
            Some(_) => Progress::Done(()),
            None if !offered.iter().any(|d| d.contains("-mig-")) => Progress::Pending("MIG offers not back yet".into()),
            None => Progress::Pending(scheduling_message(&bed.ns.api::<Pod>().get(pod).await?)),
        })
    })
    .await;
    resync.seconds.insert("new Pod prepared", prepared);
}

/// Waits until the API server answers again; returns when.
async fn api_back(client: &Client) -> Instant {
    wait_until("the API server back", Duration::from_secs(60), || async {
        Ok(match client.apiserver_version().await {
            Ok(_) => match Api::<Node>::all(client.clone())
                .list(&ListParams::default().limit(1))
                .await
            {
                Ok(_) => Progress::Done(()),
                Err(e) => Progress::Pending(e.to_string()),
            },
            Err(e) => Progress::Pending(e.to_string()),
        })
    })
    .await
    .unwrap();
    Instant::now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_component_resyncs_within_ten_seconds_with_nothing_duplicated_or_lost() {
    let cluster = TestCluster::private_of_the_shared_release("outages").await.unwrap();
    let mut bed = Bed::start(cluster.clone()).await;
    let ns = bed.ns.name().to_owned();
    let expression = r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "MIG" && device.attributes["gpu.deckhouse.io"].migProfile == "1g.6gb""#;
    let class = device_class(&bed.ns, "mig", expression, None);
    create(&Api::<DeviceClass>::all(bed.admin()), &class).await;
    one_request_template(&bed.ns, "mig", json!({"deviceClassName": class.metadata.name}), None).await;
    create(&bed.ns.api::<Pod>(), &templated_pod("steady", bed.node.name(), "mig")).await;
    bed.prepared_within("steady", Duration::from_secs(90)).await;
    let mut table = Vec::new();
    let mut pods = vec!["steady"];

    for (outage, component) in [
        ("kube-apiserver killed and restarted", "kube-apiserver"),
        ("etcd killed and restarted", "etcd"),
    ] {
        // Load: a Pod created just before the outage, prepared across it.
        let loaded: &'static str = if component == "etcd" { "load-etcd" } else { "load-api" };
        create(&bed.ns.api::<Pod>(), &templated_pod(loaded, bed.node.name(), "mig")).await;
        cluster.restart(component, Duration::from_secs(2)).unwrap();
        let back = api_back(&bed.admin()).await;
        let mut resync = Resync {
            outage,
            ..Resync::default()
        };
        // Our components first, timed from the API's return; then the Pods, which also wait for
        // the upstream scheduler (the loaded Pod's time is when it was seen prepared, at most).
        let probe_pod: &'static str = if component == "etcd" { "probe-etcd" } else { "probe-api" };
        probe(&bed, back, probe_pod, &mut resync).await;
        bed.prepared_within(loaded, SCHEDULING_DEADLINE.saturating_sub(back.elapsed()))
            .await;
        resync
            .seconds
            .insert("Pod created before prepared (seen by)", back.elapsed().as_secs_f64());
        for pod in [loaded, probe_pod] {
            bed.ns.api::<Pod>().delete(pod, &DeleteParams::default()).await.unwrap();
        }
        bed.assert_consistent(&pods).await;
        table.push(resync);
    }

    // Every watch and connection of the node's components dropped at once.
    let dropped = bed.proxy.cut();
    let back = Instant::now();
    let mut resync = Resync {
        outage: "every watch and connection dropped",
        ..Resync::default()
    };
    probe(&bed, back, "probe-watch", &mut resync).await;
    resync.seconds.insert("connections cut", dropped as f64);
    bed.ns
        .api::<Pod>()
        .delete("probe-watch", &DeleteParams::default())
        .await
        .unwrap();
    table.push(resync);

    // gpu-handler killed while the kubelet calls it: stopped holding the node lock with a second
    // call waiting behind it, then SIGKILL.
    bed.restart_handler("prepare/after/check-allocation");
    for pod in ["during-a", "during-b"] {
        create(&bed.ns.api::<Pod>(), &templated_pod(pod, bed.node.name(), "mig")).await;
    }
    let marker = bed.ws.dir.path().join("fault-reached");
    wait_until("the handler inside a prepare", Duration::from_secs(90), || async {
        Ok(if marker.exists() {
            Progress::Done(())
        } else {
            Progress::Pending(String::new())
        })
    })
    .await
    .unwrap();
    bed.restart_handler("");
    let back = Instant::now();
    let mut resync = Resync {
        outage: "gpu-handler killed during kubelet calls",
        ..Resync::default()
    };
    for pod in ["during-a", "during-b"] {
        let left = RESYNC_DEADLINE.saturating_sub(back.elapsed());
        bed.prepared_within(pod, left).await;
    }
    resync
        .seconds
        .insert("both Pods prepared", back.elapsed().as_secs_f64());
    pods.extend(["during-a", "during-b"]);
    bed.assert_consistent(&pods).await;
    table.push(resync);

    // The MPS control daemon killed, alone and together with gpu-handler.
    for pod in pods.drain(..) {
        bed.ns.api::<Pod>().delete(pod, &DeleteParams::default()).await.unwrap();
    }
    wait_until("the MIG Pods gone", Duration::from_secs(60), || async {
        let left = bed.ns.api::<Pod>().list(&ListParams::default()).await?.items.len();
        Ok(if left == 0 {
            Progress::Done(())
        } else {
            Progress::Pending(format!("{left} Pods"))
        })
    })
    .await
    .unwrap();
    let mps_label = Patch::Merge(json!({"metadata": {"labels": {"gpu.deckhouse.io/allow-mps": "true"}}}));
    Api::<Node>::all(bed.admin())
        .patch(bed.node.name(), &PatchParams::default(), &mps_label)
        .await
        .unwrap();
    let mps = r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].sharing == "MPS""#;
    let class = device_class(&bed.ns, "mps", mps, None);
    create(&Api::<DeviceClass>::all(bed.admin()), &class).await;
    let exactly = json!({"deviceClassName": class.metadata.name, "capacity": {"requests": {"gpu.deckhouse.io/sharePercent": "50"}}});
    one_request_template(&bed.ns, "mps", exactly, None).await;
    create(&bed.ns.api::<Pod>(), &templated_pod("share", bed.node.name(), "mps")).await;
    bed.prepared_within("share", Duration::from_secs(60)).await;
    let uuid = "GPU-010a3000-0000-4000-8000-a30000000001";
    for (outage, with_handler) in [
        ("MPS control daemon killed", false),
        ("MPS daemon and gpu-handler killed", true),
    ] {
        let killed = bed.tools.kill_mps_daemon(uuid).expect("a running daemon");
        if with_handler {
            bed.restart_handler("");
        }
        let back = Instant::now();
        let mut resync = Resync {
            outage,
            ..Resync::default()
        };
        let tools = &bed.tools;
        let seconds = resync_time("the MPS daemon running again", back, RESYNC_DEADLINE, || async {
            Ok(match tools.mps_daemon_pid(uuid) {
                Some(pid) if pid != killed => Progress::Done(()),
                other => Progress::Pending(format!("{other:?}")),
            })
        })
        .await;
        resync.seconds.insert("daemon back", seconds);
        table.push(resync);
    }
    let events = Api::<Event>::namespaced(bed.admin(), "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let told = events.items.iter().any(|e| {
        e.reason.as_deref() == Some("MpsDaemonRestarted")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(bed.node.name())
    });
    assert!(told, "an MpsDaemonRestarted Event on the Node");
    assert!(bed.kubelet.prepared(&ns, "share").is_some());

    println!("| outage | resynced after (from the API back, or the kill) |\n| --- | --- |");
    for row in &table {
        println!("{}", row.row());
    }
}
