//! The module's monitoring queries only metrics our components really serve. The test runs
//! gpu-node-agent and gpu-handler on a fixture node with the mock NVML and the kubelet simulator
//! (the plugin-node harness), gpu-controller and gpu-dra-controller; one claim is prepared and
//! unprepared and one is refused, and the handler, the agent and both controllers report what
//! happened: the handler what it offers, which Pod container uses the prepared card and the refused
//! prepare's kind of device; gpu-dra-controller the allocation and its seconds, which a restart of it
//! neither counts twice nor stops. Then every `gpu_*` name queried in `monitoring/` (the rules' `expr`, the dashboards'
//! targets and templating queries) must be served by one of the components' scrapes: a counter
//! through its `_total` series, a histogram through `_bucket`/`_sum`/`_count`. A family without
//! series is not served at all, so the scrapes are taken while the claim is prepared and after.
//! `tools/test/module-checks.sh` checks the kube-state-metrics and DCGM names.
//!
//! gpu-controller acts on every PhysicalGPU of the shared cluster: it waits behind a Lease another
//! holder keeps, so it never writes DriverReady (its inventory metrics need no leadership). The
//! allocation metrics come from the leader's audit, so gpu-dra-controller leads, as in
//! `dra_controller.rs`; it allocates nothing here (no Pod of this test is gated).

mod handler_node;
mod monitoring_components;
mod monitoring_queries;
mod plugin_node;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use host_fixtures::NamedHost;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use monitoring_components::{LEASE_HOLDER, hold_lease, launch_controller, metrics_when, start_controller};
use monitoring_queries::{queried_gpu_metrics, scrape, served_names, value};
use plugin_node::PluginNode;
use serde_json::json;
use support::components::*;
use support::*;
use testbed::{Progress, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_gpu_metric_the_monitoring_queries_is_served_by_a_running_component() {
    let node = PluginNode::start("monitoring", NamedHost::A30Pcie, &[]).await;
    let ns = &node.s.ns;
    hold_lease(ns, "gpu-controller").await;
    let (controller, controller_port, _) = start_controller(ns, &node.s.ws, "gpu-controller", controller_rules()).await;
    let (mut allocator, allocator_port, allocator_kubeconfig) =
        start_controller(ns, &node.s.ws, "gpu-dra-controller", dra_controller_rules()).await;
    let gpu = node.s.gpus.get(&node.s.name).await.unwrap();
    let uuid = gpu
        .status
        .as_ref()
        .and_then(|s| s.current_state.as_ref()?.nvidia.as_ref()?.gpu_uuid.clone())
        .expect("the handler read the card's UUID before it offered it");

    // A whole card prepared, then unprepared: the handler counts both and its gauges follow the checkpoint.
    let classes = Api::<DeviceClass>::all(ns.client());
    let whole = create(&classes, &device_type_class(ns, "whole", "Physical")).await;
    one_request_template(ns, "whole", json!({"deviceClassName": whole.name_any()}), None).await;
    create(&ns.api::<Pod>(), &templated_pod("trainer", node.s.node.name(), "whole")).await;
    let prepared = node.wait_prepared("trainer").await;
    let claim = prepared.keys().next().unwrap().clone();
    let mut scrapes: Vec<(&str, String)> = Vec::new();
    // The prepared device by its card's UUID (dcgm-exporter's label), with its claim, and with the
    // Pod container that uses it.
    let card = [
        ("claim", claim.as_str()),
        ("device", "gpu0"),
        ("physicalgpu", node.s.name.as_str()),
        ("UUID", uuid.as_str()),
        ("GPU_I_ID", ""),
        ("MIG_UUID", ""),
    ];
    let pod_device = [
        &[("namespace", ns.name()), ("pod", "trainer"), ("container", "main")][..],
        &card,
    ]
    .concat();
    let text = metrics_when(
        node.handler_port,
        &node.handler,
        "the prepared claim and the Pod using it in the handler's metrics",
        |t| {
            value(t, "gpu_handler_prepared_claims", &[]) == Some(1.0)
                && value(t, "gpu_handler_pod_device_info", &pod_device) == Some(1.0)
        },
    )
    .await;
    scrapes.push(("gpu-handler", text.clone()));
    assert_eq!(
        value(&text, "gpu_handler_pod_device_info", &[]),
        Some(1.0),
        "one container uses one device: {text}"
    );
    let success = [("operation", "prepare"), ("result", "success")];
    assert!(
        value(&text, "gpu_handler_claim_operations_total", &success) >= Some(1.0),
        "{text}"
    );
    assert!(
        value(
            &text,
            "gpu_handler_claim_operation_duration_seconds_count",
            &[("operation", "prepare")]
        ) >= Some(1.0),
        "{text}"
    );
    let device = [&[("claim_namespace", ns.name())][..], &card].concat();
    assert_eq!(
        value(&text, "gpu_handler_prepared_device_info", &device),
        Some(1.0),
        "{text}"
    );
    assert_eq!(value(&text, "gpu_handler_plugin_registered", &[]), Some(1.0), "{text}");
    // What the node offers: the whole card once (its MIG placements beside it, the card's counters
    // making them exclusive).
    let offers = |device_type: &'static str| {
        [
            ("node", node.s.node.name()),
            ("physicalgpu", node.s.name.as_str()),
            ("deviceType", device_type),
        ]
    };
    assert_eq!(
        value(&text, "gpu_dra_resourceslice_offers", &offers("Physical")),
        Some(1.0),
        "{text}"
    );
    // The allocator's audit counts the scheduler's allocation by class, device type and node, and
    // its clock counts the allocation and the seconds it holds by class and namespace.
    let allocation = [
        ("class", whole.name_any()),
        ("deviceType", "Physical".to_owned()),
        ("node", node.s.node.name().to_owned()),
    ];
    let allocation: Vec<(&str, &str)> = allocation.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let class_name = whole.name_any();
    let tenant = [("class", class_name.as_str()), ("namespace", ns.name())];
    let text = metrics_when(
        allocator_port,
        &allocator,
        "the allocation and its seconds in gpu-dra-controller's metrics",
        |t| {
            value(t, "gpu_dra_claim_allocations", &allocation) == Some(1.0)
                && value(t, "gpu_dra_allocations_total", &tenant) == Some(1.0)
                && value(t, "gpu_dra_allocation_seconds_total", &tenant) > Some(0.0)
        },
    )
    .await;
    scrapes.push(("gpu-dra-controller", text));

    // gpu-dra-controller restarts while the claim holds the card: the new process does not count the
    // running claim as a new allocation nor its earlier seconds again (a counter reset to Prometheus),
    // and its seconds accrue again from the claim it lists.
    allocator.terminate(Duration::from_secs(10));
    let (allocator, allocator_port) =
        launch_controller(ns, &node.s.ws, "gpu-dra-controller", &allocator_kubeconfig).await;
    let text = metrics_when(
        allocator_port,
        &allocator,
        "the running claim's seconds accruing in the restarted gpu-dra-controller",
        |t| {
            value(t, "gpu_dra_allocations_total", &tenant) == Some(0.0)
                && value(t, "gpu_dra_allocation_seconds_total", &tenant) > Some(0.0)
        },
    )
    .await;
    scrapes.push(("gpu-dra-controller", text));

    ns.api::<Pod>()
        .delete("trainer", &DeleteParams::default())
        .await
        .unwrap();
    node.wait_pod_gone("trainer").await;
    let text = metrics_when(
        node.handler_port,
        &node.handler,
        "the unprepared claim gone from the metrics",
        |t| value(t, "gpu_handler_prepared_claims", &[]) == Some(0.0),
    )
    .await;
    let unprepared = [("operation", "unprepare"), ("result", "success")];
    assert!(
        value(&text, "gpu_handler_claim_operations_total", &unprepared) >= Some(1.0),
        "{text}"
    );
    assert_eq!(value(&text, "gpu_handler_prepared_device_info", &[]), None, "{text}");
    assert_eq!(value(&text, "gpu_handler_pod_device_info", &[]), None, "{text}");
    // Released: the claim's seconds stop (two scrapes after the claim is gone read the same).
    let claims = ns.api::<k8s_openapi::api::resource::v1::ResourceClaim>();
    wait_until("the trainer's claim gone", Duration::from_secs(60), || async {
        Ok(match claims.get_opt(&claim).await? {
            None => Progress::Done(()),
            Some(c) => Progress::Pending(format!("{:?}", c.status)),
        })
    })
    .await
    .unwrap();
    let stopped = wait_until(
        "the released claim's seconds stopped",
        Duration::from_secs(60),
        || async {
            let first = value(&scrape(allocator_port)?, "gpu_dra_allocation_seconds_total", &tenant);
            let second = value(&scrape(allocator_port)?, "gpu_dra_allocation_seconds_total", &tenant);
            Ok(if first.is_some() && first == second {
                Progress::Done(first)
            } else {
                Progress::Pending(format!("{first:?} then {second:?}"))
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- gpu-dra-controller log ---\n{}", allocator.log()));
    assert!(stopped > Some(0.0), "{stopped:?}");

    // A MIG device asked for a virtual machine is refused: counted as a failure with its reason.
    let mig = create(&classes, &device_type_class(ns, "mig", "MIG")).await;
    one_request_template(ns, "mig", json!({"deviceClassName": mig.name_any()}), None).await;
    let mut vm = templated_pod("vm", node.s.node.name(), "mig");
    vm.metadata.annotations = Some([("gpu.deckhouse.io/vfio".to_owned(), "true".to_owned())].into());
    create(&ns.api::<Pod>(), &vm).await;
    node.wait_prepare_failure_on_pod().await;
    let refused = [("operation", "prepare"), ("result", "failure"), ("reason", "Refused")];
    let refused_mig = [("reason", "Refused"), ("deviceType", "MIG"), ("vendor", "nvidia")];
    let text = metrics_when(node.handler_port, &node.handler, "the refused prepare counted", |t| {
        value(t, "gpu_handler_claim_operations_total", &refused) >= Some(1.0)
            && value(t, "gpu_dra_prepare_failures_total", &refused_mig) >= Some(1.0)
    })
    .await;
    assert!(
        value(&text, "gpu_dra_resourceslice_offers", &offers("MIG")) >= Some(1.0),
        "the card's MIG placements are offered: {text}"
    );
    scrapes.push(("gpu-handler", text));

    // An application Xid is counted; a critical one is also an active cause of the card.
    node.mock.state().inject_xid(node.s.address, 13, None, None).unwrap();
    node.mock.state().inject_xid(node.s.address, 48, None, None).unwrap();
    let critical = [("cause", "XidCritical"), ("detail", "48")];
    let text = metrics_when(
        node.handler_port,
        &node.handler,
        "the Xids counted, the critical one a cause",
        |t| {
            value(
                t,
                "gpu_handler_xid_errors_total",
                &[("xid", "13"), ("class", "application")],
            ) == Some(1.0)
                && value(
                    t,
                    "gpu_handler_xid_errors_total",
                    &[("xid", "48"), ("class", "critical")],
                ) == Some(1.0)
                && value(t, "gpu_handler_gpu_health_cause", &critical) == Some(1.0)
        },
    )
    .await;
    scrapes.push(("gpu-handler", text));

    // The node agent counts the card it keeps a PhysicalGPU for.
    let agent_text = scrape(node.s.agent_port).unwrap();
    assert_eq!(
        value(&agent_text, "gpu_node_agent_gpus", &[]),
        Some(1.0),
        "{agent_text}"
    );
    assert_eq!(
        value(&agent_text, "gpu_node_agent_sync_errors_total", &[]),
        Some(0.0),
        "{agent_text}"
    );
    scrapes.push(("gpu-node-agent", agent_text));

    // gpu-controller shows the card with its node, model and every condition it has.
    let model = gpu.labels()["gpu.deckhouse.io/device"].clone();
    let text = wait_until(
        "the card's conditions in gpu-controller's metrics",
        Duration::from_secs(60),
        || async {
            let gpu = node.s.gpus.get(&node.s.name).await?;
            let text = scrape(controller_port)?;
            let base = [
                ("physicalgpu", node.s.name.as_str()),
                ("node", node.s.node.name()),
                ("model", model.as_str()),
            ];
            let info = [
                &base[..],
                &[
                    ("UUID", uuid.as_str()),
                    ("pci_address", node.s.address),
                    ("vendor", "nvidia"),
                ],
            ]
            .concat();
            let conditions = gpu.status.and_then(|s| s.conditions).unwrap_or_default();
            let all_shown = value(&text, "gpu_physicalgpu_info", &info) == Some(1.0)
                && conditions.len() == 2
                && conditions.iter().all(|c| {
                    let labels = [
                        &base[..],
                        &[
                            ("condition", c.type_.as_str()),
                            ("status", c.status.as_str()),
                            ("reason", c.reason.as_str()),
                        ],
                    ]
                    .concat();
                    value(&text, "gpu_physicalgpu_condition", &labels) == Some(1.0)
                });
            Ok(if all_shown {
                Progress::Done(text)
            } else {
                Progress::Pending(format!("{conditions:?}\n{text}"))
            })
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e}\n--- gpu-controller log ---\n{}", controller.log()));
    scrapes.push(("gpu-controller", text));
    scrapes.push(("gpu-dra-controller", scrape(allocator_port).unwrap()));

    // Every gpu_* name the rules and dashboards query is one the components served.
    let mut served: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (component, text) in &scrapes {
        served.entry(component).or_default().extend(served_names(text));
    }
    let queried = queried_gpu_metrics();
    for prefix in ["gpu_handler_", "gpu_node_agent_", "gpu_physicalgpu_", "gpu_dra_"] {
        assert!(
            queried.keys().any(|name| name.starts_with(prefix)),
            "monitoring/ queries no {prefix}* metric: {queried:?}"
        );
    }
    let missing: Vec<String> = queried
        .iter()
        .filter(|(name, _)| !served.values().any(|names| names.contains(*name)))
        .map(|(name, files)| format!("{name} (queried in {files:?})"))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but served by no component: {missing:#?}\nserved: {served:#?}"
    );

    // gpu-controller never led: its Lease is still the other holder's.
    let lease = ns.api::<Lease>().get("gpu-controller").await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some(LEASE_HOLDER)
    );
    drop((controller, allocator));
}
