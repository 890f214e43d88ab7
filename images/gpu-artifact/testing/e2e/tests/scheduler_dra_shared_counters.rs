//! Two offers that consume the same counter can never both be allocated: the scheduler allocates
//! one, and the other Pod stays Pending with the scheduler's reason. Published in the 1.34 layout
//! (counters beside their devices) on 1.34 and in the split layout (a counter slice and a device
//! slice) on 1.35+, as each release requires.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimTemplate, ResourceSlice};
use kube::Api;
use serde_json::json;
use support::*;
use testbed::{Progress, ReadyNode, TestNamespace, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offers_sharing_a_counter_exclude_each_other() {
    let ns = TestNamespace::create("shared-counters").await.unwrap();
    let node = ReadyNode::register(&ns, "a30", BTreeMap::new()).await.unwrap();
    let client = ns.client();

    let set = "pgpu-0000-01-00-0";
    let counters = json!([{"name": set, "counters": {"memory": {"value": "24Gi"}}}]);
    let devices = json!([
        device("gpu0", "Physical", Some((set, "24Gi"))),
        device("gpu0-mig-4g24gb-0", "MIG", Some((set, "24Gi"))),
    ]);
    let slices = Api::<ResourceSlice>::all(client.clone());
    publish_card(&ns, node.name(), counters, devices).await;
    // The gate is really on: the server kept the counters instead of silently dropping them.
    let stored = slices.list(&Default::default()).await.unwrap();
    let kept = stored
        .items
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(node.name()))
        .any(|s| s.spec.shared_counters.as_ref().is_some_and(|c| c[0].name == set));
    assert!(kept, "sharedCounters were dropped: DRAPartitionableDevices is off");

    let class = device_class(&ns, "any-gpu", r#"device.driver == "gpu.deckhouse.io""#, None);
    create(&Api::<DeviceClass>::all(client.clone()), &class).await;
    let template: ResourceClaimTemplate = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": ns.unique("any-gpu")}}]}}},
    }))
    .unwrap();
    create(&ns.api::<ResourceClaimTemplate>(), &template).await;

    let uses_template = json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]});
    let claims_gpu = json!({"claims": [{"name": "gpu"}]});
    for name in ["first", "second"] {
        create(
            &ns.api::<Pod>(),
            &pod(name, node.name(), claims_gpu.clone(), uses_template.clone()),
        )
        .await;
    }

    let pods = ns.api::<Pod>();
    let (bound, pending) = wait_until(
        "one pod bound and the other unschedulable",
        Duration::from_secs(60),
        || async {
            let mut bound = vec![];
            let mut unschedulable = vec![];
            let mut seen = vec![];
            for name in ["first", "second"] {
                let pod = pods.get(name).await?;
                let message = scheduling_message(&pod);
                if pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some() {
                    bound.push(name);
                } else if message.starts_with("Unschedulable:") {
                    unschedulable.push((name, message.clone()));
                }
                seen.push(format!("{name}: {message}"));
            }
            Ok(match (bound.as_slice(), unschedulable.as_slice()) {
                ([b], [u]) => Progress::Done((b.to_string(), u.clone())),
                _ => Progress::Pending(seen.join("; ")),
            })
        },
    )
    .await
    .unwrap();

    assert!(
        pending.1.contains("cannot allocate all claims"),
        "the scheduler says why {} waits: {}",
        pending.0,
        pending.1
    );
    let allocated: Vec<_> = claims(&ns).await.iter().flat_map(allocated_devices).collect();
    assert_eq!(
        allocated.len(),
        1,
        "exactly one offer of the card is allocated (bound: {bound}): {allocated:?}"
    );
}
