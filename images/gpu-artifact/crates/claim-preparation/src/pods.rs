//! The Pods a claim is reserved for, as the node's prepare needs them: their
//! names and UIDs for the QEMU hook payload, and whether one asks for the
//! card in a virtual machine with the annotation `gpu.deckhouse.io/vfio: "true"`.
//!
//! Needs RBAC `get` on `pods` in the claim's namespace.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::{Api, Client};
use node_prepare::ReservedPod;

/// The Pod annotation that hands the claim's cards to vfio-pci.
pub const VFIO_ANNOTATION: &str = "gpu.deckhouse.io/vfio";

/// The Pods of `status.reservedFor` that still exist (a Pod replaced under the same name is not
/// the one the claim was reserved for), and whether one of them asks for VFIO.
pub async fn reserved_pods(client: &Client, claim: &ResourceClaim) -> Result<(Vec<ReservedPod>, bool), String> {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let api = Api::<Pod>::namespaced(client.clone(), &namespace);
    let mut pods = Vec::new();
    let mut vfio = false;
    for reserved in reserved_for_pods(claim) {
        let pod = api.get_opt(&reserved.name).await.map_err(|error| {
            format!(
                "claim {namespace}/{claim_name}: reading its Pod {namespace}/{} failed: {error}",
                reserved.name
            )
        })?;
        let Some(pod) = pod.filter(|pod| pod.metadata.uid.as_deref() == Some(reserved.uid.as_str())) else {
            continue;
        };
        vfio |= asks_for_vfio(&pod);
        pods.push(reserved);
    }
    Ok((pods, vfio))
}

/// The Pods in `status.reservedFor` (other consumers are not Pods).
fn reserved_for_pods(claim: &ResourceClaim) -> Vec<ReservedPod> {
    claim
        .status
        .as_ref()
        .and_then(|status| status.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .filter(|consumer| consumer.resource == "pods" && consumer.api_group.as_deref().unwrap_or("").is_empty())
        .map(|consumer| ReservedPod {
            name: consumer.name.clone(),
            uid: consumer.uid.clone(),
        })
        .collect()
}

/// `gpu.deckhouse.io/vfio: "true"`, exactly (any other value asks for nothing).
pub fn asks_for_vfio(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|annotations| annotations.get(VFIO_ANNOTATION))
        .is_some_and(|value| value == "true")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::resource::v1::{ResourceClaimConsumerReference, ResourceClaimStatus};

    fn pod(annotation: Option<&str>) -> Pod {
        let mut pod = Pod::default();
        if let Some(value) = annotation {
            pod.metadata.annotations = Some([(VFIO_ANNOTATION.to_owned(), value.to_owned())].into());
        }
        pod
    }

    #[test]
    fn only_the_exact_true_asks_for_vfio() {
        assert!(asks_for_vfio(&pod(Some("true"))));
        assert!(!asks_for_vfio(&pod(Some("True"))));
        assert!(!asks_for_vfio(&pod(Some("false"))));
        assert!(!asks_for_vfio(&pod(None)));
    }

    #[test]
    fn only_pods_of_reserved_for_are_listed() {
        let consumer = |resource: &str, name: &str| ResourceClaimConsumerReference {
            api_group: None,
            resource: resource.into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        };
        let claim = ResourceClaim {
            status: Some(ResourceClaimStatus {
                reserved_for: Some(vec![consumer("pods", "vm-0"), consumer("deployments", "d")]),
                ..ResourceClaimStatus::default()
            }),
            ..ResourceClaim::default()
        };
        assert_eq!(
            reserved_for_pods(&claim),
            [ReservedPod {
                name: "vm-0".into(),
                uid: "uid-vm-0".into(),
            }]
        );
    }
}
