//! `status.containerStatuses[].allocatedResourcesStatus` as the kubelet computes it
//! (`pkg/kubelet/cm/dra/manager.go` `UpdateAllocatedResourcesStatus`, 1.34 and 1.37): for every
//! container with `resources.claims`, one entry per claim reference named `claim:<name>` or
//! `claim:<name>/<request>`, listing each device of the claim (of that request) with its health
//! from the health cache; the resource id is the device's first CDI id, else
//! `<driver>/<pool>/<device>`; the message only where the `ResourceHealthStatusMessage` gate is on
//! (1.36+). Entries without devices are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::claim_cache::ClaimCache;
use crate::health_cache::HealthCache;

/// Container name -> its `allocatedResourcesStatus` entries.
pub(crate) type ResourceStatuses = BTreeMap<String, Vec<Value>>;

pub(crate) fn allocated_resources_status(
    pod: &Pod,
    claims: &ClaimCache,
    health: &HealthCache,
    messages: bool,
    now: Instant,
) -> ResourceStatuses {
    let namespace = pod.metadata.namespace.clone().unwrap_or_default();
    let Some(spec) = pod.spec.as_ref() else {
        return ResourceStatuses::new();
    };
    let mut statuses = ResourceStatuses::new();
    for container in &spec.containers {
        let mut entries = Vec::new();
        for reference in container.resources.iter().flat_map(|r| r.claims.iter().flatten()) {
            let Some(claim_name) = claim_name(pod, &reference.name) else {
                continue;
            };
            let Some(devices) = claims.devices_of(&namespace, &claim_name) else {
                continue;
            };
            let request = reference.request.clone().unwrap_or_default();
            let name = if request.is_empty() {
                format!("claim:{}", reference.name)
            } else {
                format!("claim:{}/{request}", reference.name)
            };
            let base_request = request.split('/').next().unwrap_or_default();
            let mut seen = BTreeSet::new();
            let mut resources = Vec::new();
            for (driver, device) in devices
                .iter()
                .flat_map(|(driver, list)| list.iter().map(move |d| (driver, d)))
            {
                if !request.is_empty()
                    && !device.request_names.is_empty()
                    && !device.request_names.iter().any(|r| r == base_request)
                {
                    continue;
                }
                let id = device
                    .cdi_ids
                    .first()
                    .cloned()
                    .unwrap_or_else(|| format!("{driver}/{}/{}", device.pool, device.device));
                if !seen.insert(id.clone()) {
                    continue;
                }
                let (status, message) = health.get(driver, &device.pool, &device.device, now);
                let mut resource = json!({"resourceID": id, "health": status.as_str()});
                if messages && !message.is_empty() {
                    resource["message"] = json!(message);
                }
                resources.push(resource);
            }
            if !resources.is_empty() {
                entries.push(json!({"name": name, "resources": resources}));
            }
        }
        statuses.insert(container.name.clone(), entries);
    }
    statuses
}

/// The ResourceClaim a pod claim entry names: directly, or the one generated from its template.
fn claim_name(pod: &Pod, entry: &str) -> Option<String> {
    let spec_entry = pod
        .spec
        .as_ref()?
        .resource_claims
        .iter()
        .flatten()
        .find(|c| c.name == entry)?;
    if let Some(name) = &spec_entry.resource_claim_name {
        return Some(name.clone());
    }
    pod.status
        .as_ref()?
        .resource_claim_statuses
        .iter()
        .flatten()
        .find(|s| s.name == entry)?
        .resource_claim_name
        .clone()
}
