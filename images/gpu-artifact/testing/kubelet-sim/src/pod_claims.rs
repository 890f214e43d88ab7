//! Which ResourceClaims a Pod uses, and whether they are ready for the kubelet to prepare: the
//! kubelet's view, read from the Pod and the claims as the API server stores them.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use crate::dra_client::ClaimId;

/// The names of the claims `pod` uses, or why they are not known yet.
///
/// Sources, as in the kubelet: `spec.resourceClaims[].resourceClaimName` (a claim named directly),
/// `status.resourceClaimStatuses[]` for template entries (the claim the controller generated), and
/// `status.extendedResourceClaimStatus.resourceClaimName` (the scheduler's claim for extended resources).
pub(crate) fn pod_claim_names(pod: &Pod) -> Result<Vec<String>, String> {
    let status = pod.status.as_ref();
    let generated = status.and_then(|s| s.resource_claim_statuses.as_ref());
    let mut names = Vec::new();
    for entry in pod.spec.iter().flat_map(|s| s.resource_claims.iter().flatten()) {
        if let Some(name) = &entry.resource_claim_name {
            names.push(name.clone());
            continue;
        }
        let Some(generated) = generated.into_iter().flatten().find(|g| g.name == entry.name) else {
            return Err(format!(
                "the claim of pod claim entry {:?} is not generated yet (no status.resourceClaimStatuses entry)",
                entry.name
            ));
        };
        // An entry without a claim name: the template produced no claim, nothing to prepare.
        if let Some(name) = &generated.resource_claim_name {
            names.push(name.clone());
        }
    }
    if let Some(extended) = status.and_then(|s| s.extended_resource_claim_status.as_ref()) {
        names.push(extended.resource_claim_name.clone());
    }
    Ok(names)
}

/// A claim that is allocated and reserved for the Pod: what to send, and to which drivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadyClaim {
    pub id: ClaimId,
    pub drivers: BTreeSet<String>,
}

/// The claim as the kubelet may prepare it for `pod`, or why it has to wait.
pub(crate) fn ready_claim(claim: &ResourceClaim, pod: &Pod) -> Result<ReadyClaim, String> {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let pod_uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let status = claim.status.as_ref();
    let Some(allocation) = status.and_then(|s| s.allocation.as_ref()) else {
        return Err(format!("ResourceClaim {namespace}/{name} is not allocated yet"));
    };
    let reserved = status
        .and_then(|s| s.reserved_for.as_ref())
        .is_some_and(|consumers| consumers.iter().any(|c| c.uid == pod_uid));
    if !reserved {
        return Err(format!(
            "ResourceClaim {namespace}/{name} is not reserved for pod {}/{} yet",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let drivers = allocation
        .devices
        .iter()
        .flat_map(|d| d.results.iter().flatten())
        .map(|result| result.driver.clone())
        .collect();
    Ok(ReadyClaim {
        id: ClaimId {
            namespace,
            name,
            uid: claim.metadata.uid.clone().unwrap_or_default(),
        },
        drivers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec_claims: serde_json::Value, status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"},
            "spec": {"containers": [{"name": "c"}], "resourceClaims": spec_claims},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn direct_template_and_extended_claims_are_all_found() {
        let pod = pod(
            json!([{"name": "direct", "resourceClaimName": "shared-gpu"}, {"name": "tpl", "resourceClaimTemplateName": "t"}]),
            json!({
                "resourceClaimStatuses": [{"name": "tpl", "resourceClaimName": "p-tpl-x7k2"}],
                "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-abc", "requestMappings": []},
            }),
        );
        assert_eq!(
            pod_claim_names(&pod).unwrap(),
            vec!["shared-gpu", "p-tpl-x7k2", "p-extended-resources-abc"]
        );
    }

    #[test]
    fn a_template_claim_not_generated_yet_means_wait() {
        let pod = pod(json!([{"name": "tpl", "resourceClaimTemplateName": "t"}]), json!({}));
        assert!(
            pod_claim_names(&pod)
                .unwrap_err()
                .contains("\"tpl\" is not generated yet")
        );
    }

    fn claim(status: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "claim-uid"},
            "spec": {"devices": {}},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_claim_is_ready_only_when_allocated_and_reserved_for_the_pod() {
        let pod = pod(json!([]), json!({}));
        let allocation = json!({"devices": {"results": [
            {"request": "r", "driver": "gpu.deckhouse.io", "pool": "p", "device": "gpu0"},
        ]}});
        assert_eq!(
            ready_claim(&claim(json!({})), &pod).unwrap_err(),
            "ResourceClaim ns/c is not allocated yet"
        );
        let other =
            json!({"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "o", "uid": "other"}]});
        assert_eq!(
            ready_claim(&claim(other), &pod).unwrap_err(),
            "ResourceClaim ns/c is not reserved for pod ns/p yet"
        );
        let ours =
            json!({"allocation": allocation, "reservedFor": [{"resource": "pods", "name": "p", "uid": "pod-uid"}]});
        let ready = ready_claim(&claim(ours), &pod).unwrap();
        assert_eq!(ready.id.uid, "claim-uid");
        assert_eq!(ready.drivers, BTreeSet::from(["gpu.deckhouse.io".to_owned()]));
    }
}
