//! Where a failed prepare is told: the claim and the Pods that wait for it.

use controller_plumbing::EventPublisher;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::resource::v1::ResourceClaim;
use kubelet_plugin::ClaimRef;

/// The claim as an Event's regarding object.
pub fn claim_reference(claim: &ClaimRef) -> ObjectReference {
    ObjectReference {
        api_version: Some("resource.k8s.io/v1".to_owned()),
        kind: Some("ResourceClaim".to_owned()),
        namespace: Some(claim.namespace.clone()),
        name: Some(claim.name.clone()),
        uid: Some(claim.uid.clone()),
        ..ObjectReference::default()
    }
}

/// The Pods the claim is reserved for (the ones a user looks at).
pub fn reserved_pods(claim: &ResourceClaim) -> Vec<ObjectReference> {
    let namespace = claim.metadata.namespace.clone();
    claim
        .status
        .as_ref()
        .and_then(|s| s.reserved_for.as_ref())
        .into_iter()
        .flatten()
        .filter(|consumer| consumer.resource == "pods" && consumer.api_group.as_deref().unwrap_or("").is_empty())
        .map(|pod| ObjectReference {
            api_version: Some("v1".to_owned()),
            kind: Some("Pod".to_owned()),
            namespace: namespace.clone(),
            name: Some(pod.name.clone()),
            uid: Some(pod.uid.clone()),
            ..ObjectReference::default()
        })
        .collect()
}

/// A Warning Event `reason` with `message` on the claim and each of `pods`.
pub async fn warn_everywhere(
    events: &EventPublisher,
    claim: &ClaimRef,
    pods: &[ObjectReference],
    reason: &str,
    action: &str,
    message: &str,
) {
    events
        .warning(&claim_reference(claim), reason, action, message.to_owned())
        .await;
    for pod in pods {
        events.warning(pod, reason, action, message.to_owned()).await;
    }
}
