//! Whether a Pod being created gets the scheduling gate `gpu.deckhouse.io/allocation`, and the
//! JSONPatch that adds it. Pure: the webhook looks up the claims and templates the Pod names and
//! hands over the classes their requests use.

use claim_allocation::selection::SCHEDULING_GATE;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::DeviceClaim;
use serde_json::json;

use crate::gate_classes::GateClasses;
use crate::gate_lifter::GATED_LABEL;

/// Where a Pod's claim comes from: a ResourceClaim it names, or a template a claim is made from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ClaimSource {
    Claim(String),
    Template(String),
}

/// A claim source with the DeviceClasses its requests name (`None`: it could not be read).
pub type ResolvedSource = (ClaimSource, Option<Vec<String>>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateDecision {
    /// Add the gate; the reason names the claim or resource and its class.
    Gate(String),
    /// Leave the Pod as it is, and why.
    Leave(String),
}

/// The claims and templates a Pod's `spec.resourceClaims` name.
pub fn claim_sources(pod: &Pod) -> Vec<ClaimSource> {
    let claims = pod.spec.iter().flat_map(|s| s.resource_claims.iter().flatten());
    claims
        .filter_map(|c| {
            c.resource_claim_name
                .clone()
                .map(ClaimSource::Claim)
                .or_else(|| c.resource_claim_template_name.clone().map(ClaimSource::Template))
        })
        .collect()
}

/// The DeviceClasses the requests of a claim (or template) spec name, first-available ones too.
pub fn request_classes(devices: Option<&DeviceClaim>) -> Vec<String> {
    let requests = devices.into_iter().flat_map(|d| d.requests.iter().flatten());
    let mut classes = vec![];
    for request in requests {
        classes.extend(request.exactly.iter().map(|e| e.device_class_name.clone()));
        classes.extend(
            request
                .first_available
                .iter()
                .flatten()
                .map(|s| s.device_class_name.clone()),
        );
    }
    classes
}

/// True in namespaces the module leaves alone (Deckhouse's own and the cluster's system Pods).
pub fn exempt_namespace(namespace: &str) -> bool {
    namespace == "kube-system" || namespace.starts_with("d8-")
}

fn has_gate(pod: &Pod) -> bool {
    let gates = pod.spec.iter().flat_map(|s| s.scheduling_gates.iter().flatten());
    gates.clone().any(|g| g.name == SCHEDULING_GATE)
}

/// The extended resources the Pod's containers (and init containers) request or limit.
fn extended_resources(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else { return vec![] };
    let containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    let mut names: Vec<String> = containers
        .flat_map(|c| c.resources.iter())
        .flat_map(|r| r.requests.iter().flatten().chain(r.limits.iter().flatten()))
        .map(|(name, _)| name.clone())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Why a Pod that asks for a GPU only as an extended resource is not gated. The kube-scheduler makes
/// such a Pod's claim itself, in the cycle that binds the Pod, and never for a gated Pod; a claim for
/// it that already exists (made by anyone, in an earlier cycle) makes its Filter refuse every node
/// ("cannot schedule extended resource claim") and its PostFilter delete that claim
/// (`pkg/scheduler/framework/plugins/dynamicresources`, `filterExtendedResources` and `PostFilter` in
/// v1.34.4; `extendeddynamicresources.go` in v1.37.2). So there is nothing gpu-dra-controller could
/// allocate ahead, and a gate would only delay the Pod until the lifter took it off.
pub const EXTENDED_RESOURCE_PLACEMENT: &str = "the scheduler makes the claim of an extended resource only while it binds the Pod, so best fit has nothing to allocate ahead";

/// Whether a Pod created in `namespace` goes through best fit: when a claim it names, or a template
/// its claims are made from, requests a best-fit class. Extended resources alone never gate
/// ([`EXTENDED_RESOURCE_PLACEMENT`]).
pub fn decide(pod: &Pod, namespace: &str, classes: &GateClasses, sources: &[ResolvedSource]) -> GateDecision {
    if exempt_namespace(namespace) {
        return GateDecision::Leave(format!("namespace {namespace} is exempt"));
    }
    if pod.spec.as_ref().is_some_and(|s| s.node_name.is_some()) {
        return GateDecision::Leave("the Pod is already bound to a node".into());
    }
    if has_gate(pod) {
        return GateDecision::Leave(format!("the Pod already has the gate {SCHEDULING_GATE}"));
    }
    for (source, found) in sources {
        let Some(class) = found.iter().flatten().find(|c| classes.gates(c)) else {
            continue;
        };
        let what = match source {
            ClaimSource::Claim(name) => format!("ResourceClaim {name}"),
            ClaimSource::Template(name) => format!("ResourceClaimTemplate {name}"),
        };
        return GateDecision::Gate(format!("{what} requests class {class}"));
    }
    for resource in extended_resources(pod) {
        if let Some(class) = classes.class_of_extended_resource(&resource) {
            return GateDecision::Leave(format!(
                "extended resource {resource} of class {class} is placed by the kube-scheduler: {EXTENDED_RESOURCE_PLACEMENT}"
            ));
        }
    }
    GateDecision::Leave("no claim of a best-fit class of gpu.deckhouse.io".into())
}

/// The JSONPatch (RFC 6902) that appends the gate to the Pod's scheduling gates and labels the
/// Pod [`GATED_LABEL`] (so that the gate lifter lists only gated Pods).
pub fn gate_patch(pod: &Pod) -> serde_json::Value {
    let gate = json!({"name": SCHEDULING_GATE});
    let gates = match pod.spec.as_ref().and_then(|s| s.scheduling_gates.as_ref()) {
        Some(_) => json!({"op": "add", "path": "/spec/schedulingGates/-", "value": gate}),
        None => json!({"op": "add", "path": "/spec/schedulingGates", "value": [gate]}),
    };
    let label = match &pod.metadata.labels {
        Some(_) => {
            json!({"op": "add", "path": format!("/metadata/labels/{}", GATED_LABEL.replace('/', "~1")), "value": "true"})
        }
        None => json!({"op": "add", "path": "/metadata/labels", "value": {GATED_LABEL: "true"}}),
    };
    json!([gates, label])
}

#[cfg(test)]
#[path = "pod_gate_tests.rs"]
mod tests;
