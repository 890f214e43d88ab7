//! cleanup-on-disable (afterDeleteHelm): removes what the module created outside its Helm release
//! once Helm has deleted the release: every PhysicalGPU, the node labels of the node agent, of the
//! module's NodeGroupConfigurations (GPU and CDI detection) and of bootstrap-nodes (driver-ready), the
//! ResourceSlices of the driver gpu.deckhouse.io, the Events the hooks recorded, and the scheduling gate
//! `gpu.deckhouse.io/allocation` with its label on every Pod still waiting behind it (with nothing left
//! to lift it, such a Pod would never be scheduled). By then Helm has also deleted the components'
//! ClusterRoleBindings, so a node agent still shutting down cannot recreate a PhysicalGPU (its writes
//! are denied), and the MutatingWebhookConfiguration, so no new Pod gets the gate.
//!
//! What it leaves, on purpose, is what running workloads still use: ResourceClaims allocated to our
//! devices, and on their nodes the MIG instances, vfio-pci bindings, CDI specs and checkpoint entries
//! behind them (the kubelet can no longer unprepare them without the driver). A Warning Event on the
//! Module names those claims; re-enabling the module picks them up again (gpu-handler reconciles its
//! checkpoint at start). The admin's own node labels (allow-mig, allow-mps, allow-timeslicing) and
//! DeviceClasses stay too.

use gpu_api::labels::{NODE_AGENT_LABELS, NODE_CONFIGURATION_LABELS, NODE_HOOK_LABELS};
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::{Client, discovery};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;

use super::gated_pods::GatedPod;
use crate::object_patch::{
    EVENT_COMPONENT, EVENT_NAMESPACE, Regarding, create_or_update, delete, json_patch, merge_patch, warning_event,
};
use crate::protocol::{HookConfig, HookInput, HookMetadata, HookOutput, MODULE_KEY};

const DRIVER: &str = "gpu.deckhouse.io";
/// ResourceClaims and Pods listed per request: only one page of a cluster's is in the hook's memory at a time.
const PAGE: u32 = 500;

pub fn config() -> HookConfig {
    HookConfig {
        config_version: "v1",
        metadata: HookMetadata {
            name: "cleanup-on-disable",
            path: "gpu/cleanup-on-disable",
        },
        after_delete_helm: Some(10),
        ..HookConfig::default()
    }
}

/// What the module left in the cluster, as listed right after Helm deleted the release.
#[derive(Debug, Default)]
pub struct Leftovers {
    pub physical_gpus: Vec<String>,
    /// Each node with the labels of ours it carries.
    pub labelled_nodes: Vec<(String, Vec<String>)>,
    pub resource_slices: Vec<String>,
    /// (namespace, name) of the Events the hooks recorded.
    pub events: Vec<(String, String)>,
    /// `<namespace>/<name>` of ResourceClaims allocated to devices of our driver.
    pub allocated_claims: Vec<String>,
    /// Pods that still carry our scheduling gate or its label.
    pub gated_pods: Vec<GatedPod>,
}

pub async fn run(_input: HookInput) -> anyhow::Result<HookOutput> {
    let client = Client::try_default().await?;
    Ok(plan(&list_leftovers(&client).await?, OffsetDateTime::now_utc()))
}

/// The object operations that remove the leftovers, and the Event about what stays.
pub fn plan(leftovers: &Leftovers, now: OffsetDateTime) -> HookOutput {
    let mut output = HookOutput::default();
    let ops = &mut output.kubernetes_patch;
    for name in &leftovers.physical_gpus {
        ops.push(delete("gpu.deckhouse.io/v1alpha1", "PhysicalGPU", None, name));
    }
    for (node, labels) in &leftovers.labelled_nodes {
        let nulls: Map<String, Value> = labels.iter().map(|l| (l.clone(), Value::Null)).collect();
        ops.push(merge_patch("v1", "Node", node, json!({"metadata": {"labels": nulls}})));
    }
    for name in &leftovers.resource_slices {
        ops.push(delete("resource.k8s.io/v1", "ResourceSlice", None, name));
    }
    for (namespace, name) in &leftovers.events {
        ops.push(delete("v1", "Event", Some(namespace), name));
    }
    for pod in &leftovers.gated_pods {
        ops.push(json_patch("v1", "Pod", &pod.namespace, &pod.name, pod.ungate_patch()));
    }
    if !leftovers.allocated_claims.is_empty() {
        let message = format!(
            "The module is disabled while {} ResourceClaims hold its devices ({}): their MIG instances, \
             vfio-pci bindings and CDI specs stay on the nodes until the module is enabled again and the \
             claims are released.",
            leftovers.allocated_claims.len(),
            leftovers.allocated_claims.join(", ")
        );
        let regarding = Regarding::module(MODULE_KEY);
        let event = warning_event(&regarding, "disabled", "DisabledWithAllocations", &message, now);
        ops.push(create_or_update(event));
    }
    output
}

async fn list_leftovers(client: &Client) -> anyhow::Result<Leftovers> {
    let physical_gpus = list_names(client, "gpu.deckhouse.io", "v1alpha1", "PhysicalGPU", None)
        .await?
        .into_iter()
        .map(|o| o.metadata.name.unwrap_or_default())
        .collect();
    let labelled_nodes = list_names(client, "", "v1", "Node", None)
        .await?
        .into_iter()
        .filter_map(|node| {
            let labels = node.metadata.labels.unwrap_or_default();
            let ours: Vec<String> = NODE_AGENT_LABELS
                .iter()
                .chain(NODE_CONFIGURATION_LABELS.iter())
                .chain(NODE_HOOK_LABELS.iter())
                .filter(|key| labels.contains_key(**key))
                .map(|key| key.to_string())
                .collect();
            (!ours.is_empty()).then(|| (node.metadata.name.unwrap_or_default(), ours))
        })
        .collect();
    let slices = ListParams::default().fields(&format!("spec.driver={DRIVER}"));
    let resource_slices = list_names(client, "resource.k8s.io", "v1", "ResourceSlice", Some(slices))
        .await?
        .into_iter()
        .map(|o| o.metadata.name.unwrap_or_default())
        .collect();
    // Only the hooks' own Events: their namespace, and `source` (the Event's source.component, a field
    // the API server selects on: kubernetes pkg/registry/core/event/strategy.go ToSelectableFields).
    let ours = ListParams::default().fields(&format!("source={EVENT_COMPONENT}"));
    let events = list_kept(client, ("", "v1", "Event"), Some(EVENT_NAMESPACE), ours, |_| true)
        .await?
        .into_iter()
        .map(|e| (EVENT_NAMESPACE.to_owned(), e.metadata.name.unwrap_or_default()))
        .collect();
    // A claim's driver is no field the API server selects on, so the claims come a page at a time and
    // only those holding a device of ours are kept.
    let claims = ("resource.k8s.io", "v1", "ResourceClaim");
    let allocated_claims = list_kept(
        client,
        claims,
        None,
        ListParams::default().limit(PAGE),
        holds_our_device,
    )
    .await?
    .into_iter()
    .map(|c| {
        format!(
            "{}/{}",
            c.metadata.namespace.unwrap_or_default(),
            c.metadata.name.unwrap_or_default()
        )
    })
    .collect();
    // A Pod's scheduling gates are no field the API server selects on, and a Pod may carry our gate
    // without our label (a label removed by hand), so the Pods come a page at a time too.
    let pods = ("", "v1", "Pod");
    let gated_pods = list_kept(client, pods, None, ListParams::default().limit(PAGE), |pod| {
        GatedPod::of(pod).is_some()
    })
    .await?
    .iter()
    .filter_map(GatedPod::of)
    .collect();
    Ok(Leftovers {
        physical_gpus,
        labelled_nodes,
        resource_slices,
        events,
        allocated_claims,
        gated_pods,
    })
}

/// Every object of a kind in all namespaces; none when the API server does not serve the kind (a
/// removed CRD).
async fn list_names(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    params: Option<ListParams>,
) -> anyhow::Result<Vec<DynamicObject>> {
    list_kept(client, (group, version, kind), None, params.unwrap_or_default(), |_| {
        true
    })
    .await
}

/// A claim allocated to a device of our driver.
fn holds_our_device(claim: &DynamicObject) -> bool {
    claim
        .data
        .pointer("/status/allocation/devices/results")
        .and_then(Value::as_array)
        .is_some_and(|results| results.iter().any(|r| r["driver"] == DRIVER))
}

/// The objects of a kind that `params` select and `keep` keeps, in `namespace` or in all namespaces,
/// a page at a time when `params` sets a limit (only the kept ones are held); none when the server
/// does not serve the kind.
async fn list_kept(
    client: &Client,
    (group, version, kind): (&str, &str, &str),
    namespace: Option<&str>,
    mut params: ListParams,
    keep: fn(&DynamicObject) -> bool,
) -> anyhow::Result<Vec<DynamicObject>> {
    let Ok((resource, _)) = discovery::pinned_kind(client, &GroupVersionKind::gvk(group, version, kind)).await else {
        return Ok(Vec::new());
    };
    let api: Api<DynamicObject> = match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let mut kept = Vec::new();
    loop {
        let page = api.list(&params).await?;
        kept.extend(page.items.into_iter().filter(keep));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(kept),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_leftover_becomes_one_operation_and_allocations_an_event() {
        let leftovers = Leftovers {
            physical_gpus: vec!["worker-a-0-10de-20b7".into()],
            labelled_nodes: vec![("worker-a".into(), vec!["gpu.deckhouse.io/os.id".into()])],
            resource_slices: vec!["worker-a-gpu.deckhouse.io-x".into()],
            events: vec![("default".into(), "node.worker-a.cdidisabled".into())],
            allocated_claims: vec!["team/train".into()],
            gated_pods: vec![GatedPod {
                namespace: "team".into(),
                name: "train-0".into(),
                gate_index: Some(1),
                labelled: true,
            }],
        };
        let ops = plan(&leftovers, OffsetDateTime::UNIX_EPOCH).kubernetes_patch;
        let kinds: Vec<(&str, &str)> = ops
            .iter()
            .map(|o| (o["operation"].as_str().unwrap(), o["kind"].as_str().unwrap_or("Event")))
            .collect();
        assert_eq!(
            kinds,
            [
                ("Delete", "PhysicalGPU"),
                ("MergePatch", "Node"),
                ("Delete", "ResourceSlice"),
                ("Delete", "Event"),
                ("JSONPatch", "Pod"),
                ("CreateOrUpdate", "Event")
            ]
        );
        assert_eq!(ops[4]["namespace"], "team");
        assert_eq!(
            ops[4]["jsonPatch"],
            json!([
                {"op": "test", "path": "/spec/schedulingGates/1", "value": {"name": "gpu.deckhouse.io/allocation"}},
                {"op": "remove", "path": "/spec/schedulingGates/1"},
                {"op": "remove", "path": "/metadata/labels/gpu.deckhouse.io~1allocation-gate"},
            ])
        );
        assert_eq!(
            ops[1]["mergePatch"]["metadata"]["labels"]["gpu.deckhouse.io/os.id"],
            Value::Null
        );
        assert!(ops[5]["object"]["message"].as_str().unwrap().contains("team/train"));
    }

    #[test]
    fn nothing_left_means_no_operation() {
        assert!(
            plan(&Leftovers::default(), OffsetDateTime::UNIX_EPOCH)
                .kubernetes_patch
                .is_empty()
        );
    }
}
