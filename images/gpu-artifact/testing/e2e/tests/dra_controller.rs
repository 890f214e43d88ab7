//! gpu-dra-controller on the real control plane, as a real process under its RBAC: it allocates the
//! claims of gated Pods (best fit, where the scheduler would take the first device) and ungates
//! them, and the real scheduler binds each to the allocation's node without re-allocating; a claim
//! no Pod uses stays unallocated; it audits a claim the scheduler allocated (its metric moves),
//! explains claims it cannot allocate in Events, and tells a claim that kube-controller-manager
//! released its devices. One controller runs at a time (it acts cluster-wide), so the phases share
//! one test.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice};
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::*;
use support::dra_controller_run::start_dra_controller;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

fn claim(name: &str, class: &str, selector: Option<&str>) -> ResourceClaim {
    let mut exactly = json!({"deviceClassName": class});
    if let Some(expression) = selector {
        exactly["selectors"] = json!([{"cel": {"expression": expression}}]);
    }
    serde_json::from_value(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}}),
    )
    .unwrap()
}

async fn allocated(claims: &Api<ResourceClaim>, name: &str) -> ResourceClaim {
    wait_until(&format!("claim {name} allocated"), Duration::from_secs(30), || async {
        let claim = claims.get(name).await?;
        Ok(if claim.status.as_ref().is_some_and(|s| s.allocation.is_some()) {
            Progress::Done(claim)
        } else {
            Progress::Pending("unallocated".into())
        })
    })
    .await
    .unwrap()
}

async fn event_note(ns: &TestNamespace, object: &str, reason: &str) -> String {
    let events = ns.api::<Event>();
    wait_until(
        &format!("{reason} event on {object}"),
        Duration::from_secs(20),
        || async {
            let list = events
                .list(&ListParams::default().fields(&format!("regarding.name={object}")))
                .await?;
            Ok(match list.items.iter().find(|e| e.reason.as_deref() == Some(reason)) {
                Some(e) => Progress::Done(e.note.clone().unwrap_or_default()),
                None => Progress::Pending(format!(
                    "{:?}",
                    list.items.iter().map(|e| e.reason.clone()).collect::<Vec<_>>()
                )),
            })
        },
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_allocates_what_the_scheduler_does_not_and_audits_the_rest() {
    let ns = TestNamespace::create("dra-controller").await.unwrap();
    let node = ReadyNode::register(&ns, "a30", BTreeMap::new()).await.unwrap();
    let client = ns.client();

    // One A30 offered whole and as MIG partitions; the big partitions come first in the slice, so the
    // scheduler's first-fit would take 4g.24gb where best fit takes 1g.6gb.
    let set = "pgpu-0000-01-00-0";
    let counters = json!([{"name": set, "counters": {"memory": {"value": "24Gi"}}}]);
    let devices = json!([
        device("gpu0", "Physical", Some((set, "24Gi"))),
        device("gpu0-mig-4g24gb-0", "MIG", Some((set, "24Gi"))),
        device("gpu0-mig-2g12gb-0", "MIG", Some((set, "12Gi"))),
        device("gpu0-mig-1g6gb-0", "MIG", Some((set, "6Gi"))),
        device("gpu0-mig-1g6gb-1", "MIG", Some((set, "6Gi"))),
    ]);
    let slices = Api::<ResourceSlice>::all(client.clone());
    publish_card(&ns, node.name(), counters, devices).await;
    let classes = Api::<DeviceClass>::all(client.clone());
    let mig_class = ns.unique("mig");
    let mig_cel = r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "MIG""#;
    create(&classes, &device_class(&ns, "mig", mig_cel, None)).await;

    let ws = AgentWorkspace::new();
    let (controller, port) = start_dra_controller(&ns, &ws).await;

    // 1. A claim of its own that a gated Pod uses: allocated by the controller, best fit. Another
    //    that no Pod uses is allocated by nobody.
    let claims = ns.api::<ResourceClaim>();
    create(&claims, &claim("unused", &mig_class, None)).await;
    create(&claims, &claim("standalone", &mig_class, None)).await;
    create(&ns.api::<Pod>(), &gated_claim_pod("first", node.name(), "standalone")).await;
    let standalone = allocated(&claims, "standalone").await;
    let pool = format!("gpus/{}", node.name());
    assert_eq!(
        allocated_devices(&standalone),
        vec![(pool.clone(), "gpu0-mig-1g6gb-0".to_owned())],
        "best fit: the smallest partition"
    );
    let note = event_note(&ns, "standalone", "Allocated").await;
    assert!(note.contains("gpu0-mig-1g6gb-0"), "{note}");
    bound_pod(&ns, "first").await;

    // 2. A gated Pod: allocated and ungated by the controller, bound by the scheduler, not re-allocated.
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "mig"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": mig_class}}]}}}}))
    .unwrap();
    create(&ns.api::<ResourceClaimTemplate>(), &template).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "mig"}],
                      "schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}]});
    create(
        &ns.api::<Pod>(),
        &pod("gated", node.name(), json!({"claims": [{"name": "gpu"}]}), uses),
    )
    .await;
    let bound = bound_pod(&ns, "gated").await;
    assert!(
        bound
            .spec
            .as_ref()
            .unwrap()
            .scheduling_gates
            .as_ref()
            .is_none_or(|g| g.is_empty()),
        "gate removed"
    );
    let statuses = bound.status.unwrap().resource_claim_statuses.unwrap();
    let gated_claim = claims
        .get(statuses[0].resource_claim_name.as_ref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        allocated_devices(&gated_claim),
        vec![(pool.clone(), "gpu0-mig-1g6gb-1".to_owned())]
    );
    let reserved = gated_claim
        .status
        .as_ref()
        .unwrap()
        .reserved_for
        .clone()
        .unwrap_or_default();
    assert_eq!(
        reserved.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["gated"],
        "the scheduler reserved it for the Pod"
    );
    let writers: Vec<_> = gated_claim
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(writers.contains(&"gpu-dra-controller".to_owned()), "{writers:?}");
    assert_eq!(
        allocated_devices(&claims.get("unused").await.unwrap()),
        vec![],
        "a claim no Pod uses holds no device, though one was free before either Pod came"
    );

    // 3. A claim the scheduler allocates is audited: the metric counts it.
    let physical_class = ns.unique("physical");
    let physical_cel =
        r#"device.driver == "gpu.deckhouse.io" && device.attributes["gpu.deckhouse.io"].deviceType == "Physical""#;
    create(&classes, &device_class(&ns, "physical", physical_cel, None)).await;
    let single: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "physical"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": physical_class}}]}}}}))
    .unwrap();
    create(&ns.api::<ResourceClaimTemplate>(), &single).await;
    // A second node whose card the scheduler allocates for a Pod without our gate.
    let second = ReadyNode::register(&ns, "a30b", BTreeMap::new()).await.unwrap();
    let physical_only = json!({"devices": [device("gpu0", "Physical", None)]});
    create(&slices, &slice(&ns, "second", second.name(), 1, physical_only)).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "physical"}]});
    create(
        &ns.api::<Pod>(),
        &pod("scheduled", second.name(), json!({"claims": [{"name": "gpu"}]}), uses),
    )
    .await;
    bound_pod(&ns, "scheduled").await;
    let scrape = || async {
        let out = std::process::Command::new("curl")
            .args(["-fsS", &format!("http://127.0.0.1:{port}/metrics")])
            .output()?;
        anyhow::Ok(String::from_utf8(out.stdout)?)
    };
    let metric = |class: &str, kind: &str, node: &str| {
        format!(r#"gpu_dra_claim_allocations{{class="{class}",deviceType="{kind}",node="{node}"}} "#)
    };
    let expected = [
        format!("{}1", metric(&physical_class, "Physical", second.name())),
        format!("{}2", metric(&mig_class, "MIG", node.name())),
    ];
    wait_until("allocations counted in /metrics", Duration::from_secs(20), || async {
        let body = scrape().await?;
        let lines: Vec<_> = body
            .lines()
            .filter(|l| l.starts_with("gpu_dra_claim_allocations{"))
            .collect();
        Ok(if expected.iter().all(|e| lines.contains(&e.as_str())) {
            Progress::Done(())
        } else {
            Progress::Pending(lines.join("; "))
        })
    })
    .await
    .unwrap();
    let scheduled_claim = claims
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|c| c.name_any().starts_with("scheduled-"))
        .unwrap();
    let writers: Vec<_> = scheduled_claim
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        !writers.contains(&"gpu-dra-controller".to_owned()),
        "the scheduler allocated it, not us: {writers:?}"
    );

    // 4. Bad input is explained on the claim (and on the Pod waiting for it).
    create(&claims, &claim("no-class", "no-such-class", None)).await;
    create(
        &ns.api::<Pod>(),
        &gated_claim_pod("no-class-user", node.name(), "no-class"),
    )
    .await;
    let note = event_note(&ns, "no-class", "CannotAllocate").await;
    assert!(
        note.contains("no-such-class") && note.contains("does not exist"),
        "{note}"
    );
    let bad_cel = r#"device.attributes["gpu.deckhouse.io"].noSuchAttribute == "x""#;
    create(&claims, &claim("bad-cel", &mig_class, Some(bad_cel))).await;
    create(
        &ns.api::<Pod>(),
        &gated_claim_pod("bad-cel-user", node.name(), "bad-cel"),
    )
    .await;
    let note = event_note(&ns, "bad-cel", "CannotAllocate").await;
    assert!(
        note.contains("noSuchAttribute"),
        "the CEL error reaches the user: {note}"
    );
    assert!(
        claims
            .get("bad-cel")
            .await
            .unwrap()
            .status
            .and_then(|s| s.allocation)
            .is_none()
    );

    // 5. The Pod `first` ends: kube-controller-manager deallocates its claim (the controller put the
    //    scheduler's finalizer on it), which is told on the claim; a claim its Pods left is not
    //    allocated again.
    let done = json!({"status": {"phase": "Succeeded"}});
    ns.api::<Pod>()
        .patch_status("first", &Default::default(), &kube::api::Patch::Merge(&done))
        .await
        .unwrap();
    let note = event_note(&ns, "standalone", "Released").await;
    assert!(note.contains(&format!("{pool}/gpu0-mig-1g6gb-0")), "{note}");
    let released = claims.get("standalone").await.unwrap();
    assert!(released.status.and_then(|s| s.allocation).is_none());
    drop(controller);
}
