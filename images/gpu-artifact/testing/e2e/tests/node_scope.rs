//! Node scope (invariant 5): the module's ValidatingAdmissionPolicies, as `helm` renders them,
//! keep gpu-handler and gpu-node-agent to their own node's ResourceSlices, PhysicalGPUs and Node,
//! by the node the API server binds into a Pod's ServiceAccount token. The test mints such a token
//! (TokenRequest bound to a Pod on node A, as the kubelet does for a Pod's projected token), checks
//! the fact the policies rely on (the user's extra `authentication.kubernetes.io/node-name`), and
//! writes as each component: its own node's objects pass, another node's are refused by the real
//! API server with the policy's message, and a token bound to no node is refused everywhere.
//!
//! The rendered policies match the module's accounts (`system:serviceaccount:d8-gpu:...`); the test
//! installs them for its own namespace's accounts of the same names, changing nothing else.

mod support;

use std::collections::BTreeMap;

use gpu_api::PhysicalGPU;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use support::components::{handler_rules, install_crds, node_agent_rules};
use support::policies::{install_rendered_policies, refused, until_refused};
use support::*;
use testbed::{Access, ReadyNode, TestNamespace};

/// The Node label gpu-handler writes (claim-preparation's `DCGM_PAUSED_LABEL`).
const DCGM_PAUSED: &str = "gpu.deckhouse.io/dcgm-paused";

/// A Pod of `account` bound to `node` (never run: only its binding matters to the token).
async fn pod_on(ns: &TestNamespace, name: &str, node: &str, account: &str) -> Pod {
    let mut pod = pod(
        name,
        node,
        json!({}),
        json!({"serviceAccountName": account, "nodeName": node}),
    );
    pod.spec.as_mut().unwrap().node_selector = None;
    create(&ns.api::<Pod>(), &pod).await
}

/// What the API server says a client is.
async fn extra_node_name(client: &Client) -> Option<String> {
    let review: SelfSubjectReview =
        serde_json::from_value(json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})).unwrap();
    let answer = Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    let extra = answer.status?.user_info?.extra?;
    extra.get("authentication.kubernetes.io/node-name")?.first().cloned()
}

fn slice_of(ns: &TestNamespace, node: &str) -> ResourceSlice {
    let device = json!([{"name": "gpu0", "attributes": {"gpu.deckhouse.io/deviceType": {"string": "Physical"}}}]);
    slice(ns, &format!("{node}-gpus"), node, 1, json!({"devices": device}))
}

fn gpu_of(node: &str) -> PhysicalGPU {
    serde_json::from_value(json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
        "metadata": {"name": format!("{node}-0-10de-20b7"), "labels": {"gpu.deckhouse.io/node": node}},
        "spec": {},
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_components_write_only_their_own_nodes_objects() {
    let ns = TestNamespace::create("node-scope").await.unwrap();
    install_crds(&ns.client()).await;
    let a = ReadyNode::register(&ns, "a", BTreeMap::new()).await.unwrap();
    let b = ReadyNode::register(&ns, "b", BTreeMap::new()).await.unwrap();
    let (a, b) = (a.name().to_owned(), b.name().to_owned());
    // A token of the handler's account bound to nothing (a TokenRequest without a Pod).
    let unbound = ns
        .client_as("gpu-handler", Access::Cluster(handler_rules()))
        .await
        .unwrap();
    ns.client_as("gpu-node-agent", Access::Cluster(node_agent_rules()))
        .await
        .unwrap();
    let installed = install_rendered_policies(&ns, "node-scope").await;
    assert_eq!(installed, 3, "the chart renders three node-scope policies");

    let handler_pod = pod_on(&ns, "handler", &a, "gpu-handler").await;
    let agent_pod = pod_on(&ns, "agent", &a, "gpu-node-agent").await;
    let handler = ns.client_bound_to_pod("gpu-handler", &handler_pod).await.unwrap();
    let agent = ns.client_bound_to_pod("gpu-node-agent", &agent_pod).await.unwrap();
    // The fact the policies stand on: a Pod-bound token names the Pod's node.
    assert_eq!(extra_node_name(&handler).await.as_deref(), Some(a.as_str()));
    assert_eq!(extra_node_name(&unbound).await, None);

    // Each policy takes effect on its own, asynchronously: wait until all three refuse.
    let slices = Api::<ResourceSlice>::all(handler.clone());
    let admin_slices = Api::<ResourceSlice>::all(ns.client());
    until_refused("the ResourceSlice policy", "may not write ResourceSlice", || async {
        let created = slices.create(&PostParams::default(), &slice_of(&ns, &b)).await?;
        let name = created.metadata.name.unwrap_or_default();
        admin_slices.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    })
    .await;
    let agent_gpus = Api::<PhysicalGPU>::all(agent.clone());
    let admin_gpus = Api::<PhysicalGPU>::all(ns.client());
    until_refused("the PhysicalGPU policy", "may not write PhysicalGPU", || async {
        agent_gpus.create(&PostParams::default(), &gpu_of(&b)).await?;
        admin_gpus
            .delete(&format!("{b}-0-10de-20b7"), &DeleteParams::default())
            .await?;
        Ok(())
    })
    .await;
    let probe = Patch::Merge(json!({"metadata": {"labels": {"gpu.deckhouse.io/policy-probe": "true"}}}));
    let unprobe = Patch::Merge(json!({"metadata": {"labels": {"gpu.deckhouse.io/policy-probe": null}}}));
    until_refused("the Node policy", "may not change Node", || async {
        Api::<Node>::all(agent.clone())
            .patch(&b, &PatchParams::default(), &probe)
            .await?;
        Api::<Node>::all(ns.client())
            .patch(&b, &PatchParams::default(), &unprobe)
            .await?;
        Ok(())
    })
    .await;

    // ResourceSlices: gpu-handler's own node only.
    let own = create(&slices, &slice_of(&ns, &a)).await;
    let theirs = create(&admin_slices, &slice_of(&ns, &b)).await;
    refused(
        slices
            .delete(theirs.metadata.name.as_deref().unwrap(), &DeleteParams::default())
            .await,
        "deleting another node's slice",
        "may not write ResourceSlice",
    );
    // (A slice cannot move to another node at all: nodeName and the pool are immutable.)
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}}));
    refused(
        slices
            .patch(
                theirs.metadata.name.as_deref().unwrap(),
                &PatchParams::default(),
                &relabel,
            )
            .await,
        "changing another node's slice",
        "may not write ResourceSlice",
    );
    slices
        .patch(own.metadata.name.as_deref().unwrap(), &PatchParams::default(), &relabel)
        .await
        .unwrap();
    slices
        .delete(own.metadata.name.as_deref().unwrap(), &DeleteParams::default())
        .await
        .unwrap();
    refused(
        Api::<ResourceSlice>::all(unbound.clone())
            .create(&PostParams::default(), &slice_of(&ns, &a))
            .await,
        "a token bound to no node",
        "bound to no node",
    );

    // PhysicalGPUs: the agent's own node only; the handler's status writes likewise.
    create(&agent_gpus, &gpu_of(&a)).await;
    refused(
        agent_gpus.create(&PostParams::default(), &gpu_of(&b)).await,
        "creating another node's PhysicalGPU",
        "may not write PhysicalGPU",
    );
    create(&admin_gpus, &gpu_of(&b)).await;
    refused(
        agent_gpus
            .delete(&format!("{b}-0-10de-20b7"), &DeleteParams::default())
            .await,
        "deleting another node's PhysicalGPU",
        "may not write PhysicalGPU",
    );
    let status = json!({"status": {"nodeInfo": {"nodeName": "x"}}});
    let handler_gpus = Api::<PhysicalGPU>::all(handler.clone());
    handler_gpus
        .patch_status(
            &format!("{a}-0-10de-20b7"),
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .unwrap();
    refused(
        handler_gpus
            .patch_status(
                &format!("{b}-0-10de-20b7"),
                &PatchParams::default(),
                &Patch::Merge(&status),
            )
            .await,
        "the status of another node's PhysicalGPU",
        "may not write PhysicalGPU",
    );

    // A PhysicalGPU's name is its node's too: one labelled for node A but named for B is refused.
    let mut misnamed = gpu_of(&a);
    misnamed.metadata.name = Some(format!("{b}-1-10de-20b7"));
    refused(
        agent_gpus.create(&PostParams::default(), &misnamed).await,
        "a PhysicalGPU named for another node",
        "are named <node>-<index>-<vendor>-<device>",
    );
    let mut misnamed = gpu_of(&a);
    misnamed.metadata.name = Some(format!("{a}-gpu"));
    refused(
        agent_gpus.create(&PostParams::default(), &misnamed).await,
        "a PhysicalGPU not named as the agent names them",
        "are named <node>-<index>-<vendor>-<device>",
    );
    // Nor may a node component hold one up with a finalizer.
    let finalizer = Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}}));
    refused(
        agent_gpus
            .patch(&format!("{a}-0-10de-20b7"), &PatchParams::default(), &finalizer)
            .await,
        "a finalizer on its own PhysicalGPU",
        "finalizers",
    );

    // The Node: its own, and only the labels each component writes (not the admin's, not the
    // other component's), never its finalizers. Values naming the writer, so that each write of another's key is a change.
    let labels = |keys: &[&str], writer: &str| {
        let labels: serde_json::Map<String, serde_json::Value> =
            keys.iter().map(|key| (key.to_string(), json!(writer))).collect();
        Patch::Merge(json!({"metadata": {"labels": labels}}))
    };
    let agent_keys: Vec<&str> = gpu_api::labels::NODE_AGENT_LABELS.to_vec();
    let handler_keys = vec![DCGM_PAUSED];
    let writers = [
        (&agent, "agent", &agent_keys, &handler_keys),
        (&handler, "handler", &handler_keys, &agent_keys),
    ];
    for (client, writer, own, others) in writers {
        let nodes = Api::<Node>::all(client.clone());
        nodes
            .patch(&a, &PatchParams::default(), &labels(own, writer))
            .await
            .unwrap();
        refused(
            nodes.patch(&b, &PatchParams::default(), &labels(own, writer)).await,
            "labelling another node",
            "may not change Node",
        );
        for key in [
            "gpu.deckhouse.io/allow-mps",
            "gpu.deckhouse.io/allow-mig",
            // bootstrap-nodes' label: a node component may not let gpu-handler onto its own node.
            gpu_api::labels::NODE_DRIVER_READY,
            others[0],
            "node-role.kubernetes.io/control-plane",
        ] {
            refused(
                nodes.patch(&a, &PatchParams::default(), &labels(&[key], writer)).await,
                &format!("the label {key}"),
                "may change only the labels",
            );
        }
        refused(
            nodes.patch(&a, &PatchParams::default(), &finalizer).await,
            "a finalizer on its Node",
            "finalizers",
        );
    }
}
