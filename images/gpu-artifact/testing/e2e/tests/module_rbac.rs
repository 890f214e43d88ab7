//! The RBAC the e2e suite gives gpu-node-agent, gpu-controller, gpu-handler and gpu-dra-controller
//! (`support::components`) is exactly what the module's templates render, and with it one write each
//! component must never make is denied by the real API server. The controllers hold their Leases
//! through a Role in the module's namespace limited to their own Leases, never cluster-wide.

mod support;

use gpu_api::PhysicalGPU;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::components::{controller_rules, dra_controller_rules, handler_rules, lease_rules, node_agent_rules};
use support::rendered_rbac::{rendered_cluster_rules, rendered_namespace_rules};
use testbed::{Access, TestNamespace};

type Normalised = (Vec<String>, Vec<String>, Vec<String>, Vec<String>);

/// Rules as comparable (group, resources, resource names, verbs) tuples in a stable order.
fn normalised(rules: &[PolicyRule]) -> Vec<Normalised> {
    let mut triples: Vec<_> = rules
        .iter()
        .map(|r| {
            let mut verbs = r.verbs.clone();
            verbs.sort();
            (
                r.api_groups.clone().unwrap_or_default(),
                r.resources.clone().unwrap_or_default(),
                r.resource_names.clone().unwrap_or_default(),
                verbs,
            )
        })
        .collect();
    triples.sort();
    triples
}

fn assert_forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

#[test]
fn e2e_rules_equal_the_rendered_rules() {
    assert_eq!(
        normalised(&node_agent_rules()),
        normalised(&rendered_cluster_rules("gpu-node-agent"))
    );
    assert_eq!(
        normalised(&controller_rules()),
        normalised(&rendered_cluster_rules("gpu-controller"))
    );
    assert_eq!(
        normalised(&handler_rules()),
        normalised(&rendered_cluster_rules("gpu-handler"))
    );
    assert_eq!(
        normalised(&dra_controller_rules()),
        normalised(&rendered_cluster_rules("gpu-dra-controller"))
    );
    for account in ["gpu-controller", "gpu-dra-controller"] {
        let cluster_wide_leases = rendered_cluster_rules(account)
            .into_iter()
            .filter(|r| r.resources.iter().flatten().any(|s| s == "leases"))
            .collect::<Vec<_>>();
        assert_eq!(cluster_wide_leases, [], "{account} may touch Leases cluster-wide");
        assert_eq!(
            normalised(&lease_rules(account)),
            normalised(&rendered_namespace_rules(account)),
            "{account}'s Role in d8-gpu"
        );
    }
    let every_rule = [
        "gpu-node-agent",
        "gpu-controller",
        "gpu-handler",
        "gpu-dra-controller",
        "gpu-dcgm-exporter",
    ]
    .iter()
    .flat_map(|a| rendered_cluster_rules(a));
    for rule in every_rule {
        let wild = |v: &Option<Vec<String>>| v.iter().flatten().any(|s| s == "*");
        assert!(
            !wild(&rule.api_groups) && !wild(&rule.resources) && !rule.verbs.contains(&"*".into()),
            "{rule:?}"
        );
    }
}

#[tokio::test]
async fn the_node_agent_may_not_delete_nodes_and_the_controller_may_not_create_gpus() {
    let ns = TestNamespace::create("module-rbac").await.unwrap();
    let agent = ns
        .client_as(
            "gpu-node-agent",
            Access::Cluster(rendered_cluster_rules("gpu-node-agent")),
        )
        .await
        .unwrap();
    assert_forbidden(
        Api::<Node>::all(agent.clone())
            .delete("any-node", &DeleteParams::default())
            .await,
        "gpu-node-agent deleting a Node",
    );
    assert_forbidden(
        Api::<Pod>::namespaced(agent, ns.name()).list(&Default::default()).await,
        "gpu-node-agent listing Pods",
    );

    let controller = ns
        .client_as(
            "gpu-controller",
            Access::ClusterAndNamespaced(
                rendered_cluster_rules("gpu-controller"),
                rendered_namespace_rules("gpu-controller"),
            ),
        )
        .await
        .unwrap();
    // Its own Lease it creates and renews; another component's Lease in its namespace it may not touch.
    let leases = Api::<Lease>::namespaced(controller.clone(), ns.name());
    let lease = |name: &str| -> Lease { serde_json::from_value(json!({"metadata": {"name": name}})).unwrap() };
    leases
        .create(&PostParams::default(), &lease("gpu-controller"))
        .await
        .unwrap();
    let renew = Patch::Merge(json!({"spec": {"holderIdentity": "gpu-controller-0"}}));
    leases
        .patch("gpu-controller", &PatchParams::default(), &renew)
        .await
        .unwrap();
    ns.api::<Lease>()
        .create(&PostParams::default(), &lease("kube-controller-manager"))
        .await
        .unwrap();
    assert_forbidden(
        leases
            .patch("kube-controller-manager", &PatchParams::default(), &renew)
            .await,
        "gpu-controller renewing another component's Lease",
    );
    assert_forbidden(
        Api::<Lease>::namespaced(controller.clone(), "kube-system")
            .get("kube-scheduler")
            .await,
        "gpu-controller reading a Lease outside its namespace",
    );
    let gpu: PhysicalGPU = serde_json::from_value(json!({
        "apiVersion": "gpu.deckhouse.io/v1alpha1", "kind": "PhysicalGPU",
        "metadata": {"name": ns.unique("forbidden-gpu")}, "spec": {}
    }))
    .unwrap();
    assert_forbidden(
        Api::<PhysicalGPU>::all(controller)
            .create(&PostParams::default(), &gpu)
            .await,
        "gpu-controller creating a PhysicalGPU",
    );
}

#[tokio::test]
async fn the_handler_may_not_delete_claims_and_the_dra_controller_may_not_publish_slices() {
    let ns = TestNamespace::create("module-rbac-dra").await.unwrap();
    let handler = ns
        .client_as("gpu-handler", Access::Cluster(rendered_cluster_rules("gpu-handler")))
        .await
        .unwrap();
    assert_forbidden(
        Api::<ResourceClaim>::namespaced(handler, ns.name())
            .delete("any-claim", &DeleteParams::default())
            .await,
        "gpu-handler deleting a ResourceClaim",
    );

    let allocator = ns
        .client_as(
            "gpu-dra-controller",
            Access::Cluster(rendered_cluster_rules("gpu-dra-controller")),
        )
        .await
        .unwrap();
    let slice: ResourceSlice = serde_json::from_value(json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": ns.unique("forbidden-slice")},
        "spec": {"driver": "gpu.deckhouse.io", "nodeName": "any-node",
                 "pool": {"name": "any-node", "generation": 1, "resourceSliceCount": 1}}
    }))
    .unwrap();
    assert_forbidden(
        Api::<ResourceSlice>::all(allocator.clone())
            .create(&PostParams::default(), &slice)
            .await,
        "gpu-dra-controller creating a ResourceSlice",
    );
    assert_forbidden(
        Api::<ResourceClaim>::namespaced(allocator, ns.name())
            .delete("any-claim", &DeleteParams::default())
            .await,
        "gpu-dra-controller deleting a ResourceClaim",
    );
}
