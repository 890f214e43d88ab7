//! A claim's requests, checked and normalised: each request becomes a list of alternatives
//! (one for `exactly`, one per `firstAvailable` entry, in preference order) with its class,
//! selectors, count or `All`, admin access, tolerations and capacity requests.

use std::collections::{BTreeMap, HashMap};

use dra_cel::Quantity;
use k8s_openapi::api::resource::v1::{DeviceClass, DeviceSelector, DeviceToleration, ResourceClaim};

use crate::AllocationError;

/// `AllocationResultsMaxSize` of resource.k8s.io/v1.
pub const ALLOCATION_RESULTS_MAX_SIZE: usize = 32;

pub(crate) struct Alternative<'a> {
    /// `<request>` or `<request>/<subrequest>`, as results name it.
    pub result_name: String,
    pub sub_name: Option<&'a str>,
    pub class: &'a DeviceClass,
    pub selectors: &'a [DeviceSelector],
    /// `None` for `All`.
    pub count: Option<usize>,
    pub admin: bool,
    pub tolerations: &'a [DeviceToleration],
    pub capacity: Option<BTreeMap<String, Quantity>>,
}

pub(crate) struct Request<'a> {
    pub name: &'a str,
    pub alternatives: Vec<Alternative<'a>>,
}

pub(crate) fn claim_name(claim: &ResourceClaim) -> String {
    format!(
        "{}/{}",
        claim.metadata.namespace.as_deref().unwrap_or_default(),
        claim.metadata.name.as_deref().unwrap_or_default()
    )
}

#[allow(clippy::too_many_arguments)]
fn alternative<'a>(
    claim: &str,
    classes: &'a HashMap<String, DeviceClass>,
    result_name: String,
    sub_name: Option<&'a str>,
    class_name: &str,
    selectors: &'a Option<Vec<DeviceSelector>>,
    mode: Option<&str>,
    count: Option<i64>,
    admin: bool,
    tolerations: &'a Option<Vec<DeviceToleration>>,
    capacity: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Result<Alternative<'a>, AllocationError> {
    let invalid = |reason: String| AllocationError::InvalidClaim {
        claim: claim.to_owned(),
        reason,
    };
    let class = classes.get(class_name).ok_or_else(|| AllocationError::UnknownClass {
        claim: claim.to_owned(),
        request: result_name.clone(),
        class: class_name.to_owned(),
    })?;
    let count = match mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            let n = count.unwrap_or(1);
            if n <= 0 {
                return Err(invalid(format!(
                    "request {result_name}: count must be positive, not {n}"
                )));
            }
            Some(n as usize)
        }
        "All" => None,
        other => {
            return Err(invalid(format!(
                "request {result_name}: unsupported allocation mode {other}"
            )));
        }
    };
    let capacity = match capacity {
        Some(requests) => {
            let mut parsed = BTreeMap::new();
            for (name, value) in requests {
                let q = Quantity::parse(&value.0)
                    .map_err(|e| invalid(format!("request {result_name}: capacity {name}: {e}")))?;
                parsed.insert(name.clone(), q);
            }
            Some(parsed)
        }
        None => None,
    };
    if selectors.iter().flatten().any(|s| s.cel.is_none()) {
        return Err(invalid(format!(
            "request {result_name}: selector without a CEL expression"
        )));
    }
    Ok(Alternative {
        result_name,
        sub_name,
        class,
        selectors: selectors.as_deref().unwrap_or_default(),
        count,
        admin,
        tolerations: tolerations.as_ref().map(Vec::as_slice).unwrap_or_default(),
        capacity,
    })
}

pub(crate) fn requests_of<'a>(
    claim: &'a ResourceClaim,
    classes: &'a HashMap<String, DeviceClass>,
) -> Result<Vec<Request<'a>>, AllocationError> {
    let name = claim_name(claim);
    let mut requests = Vec::new();
    let mut min_devices = 0;
    for request in claim.spec.devices.iter().flat_map(|d| d.requests.iter().flatten()) {
        let mut alternatives = Vec::new();
        if let Some(exact) = &request.exactly {
            alternatives.push(alternative(
                &name,
                classes,
                request.name.clone(),
                None,
                &exact.device_class_name,
                &exact.selectors,
                exact.allocation_mode.as_deref(),
                exact.count,
                exact.admin_access == Some(true),
                &exact.tolerations,
                exact.capacity.as_ref().and_then(|c| c.requests.as_ref()),
            )?);
        }
        for sub in request.first_available.iter().flatten() {
            alternatives.push(alternative(
                &name,
                classes,
                format!("{}/{}", request.name, sub.name),
                Some(sub.name.as_str()),
                &sub.device_class_name,
                &sub.selectors,
                sub.allocation_mode.as_deref(),
                sub.count,
                false,
                &sub.tolerations,
                sub.capacity.as_ref().and_then(|c| c.requests.as_ref()),
            )?);
        }
        if alternatives.is_empty() {
            return Err(AllocationError::InvalidClaim {
                claim: name.clone(),
                reason: format!("request {} has neither exactly nor firstAvailable", request.name),
            });
        }
        min_devices += alternatives.iter().map(|a| a.count.unwrap_or(1)).min().unwrap_or(1);
        requests.push(Request {
            name: request.name.as_str(),
            alternatives,
        });
    }
    if min_devices > ALLOCATION_RESULTS_MAX_SIZE {
        return Err(AllocationError::InvalidClaim {
            claim: name,
            reason: format!(
                "number of requested devices {min_devices} exceeds the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}"
            ),
        });
    }
    Ok(requests)
}
