//! What the controller checks in a GPUClass beyond the CRD's own rules: the parts the API server
//! cannot see (quantities and label keys as Kubernetes parses them, the extended resource name the
//! class ends up with) and the rules of the CRD again, for objects stored before a CRD update.
//! Every problem names the field and what would be accepted.

use dra_cel::Quantity;
use gpu_api::opaque_config::SharingStrategy;
use gpu_api::{ClassDeviceType, GPUClassSpec};

use crate::selectors::CheckedRequirements;

/// The spec's problems (empty: none) and its requirements in the form the selectors need.
pub(crate) fn check_spec(spec: &GPUClassSpec) -> (Vec<String>, CheckedRequirements) {
    let mut problems = Vec::new();
    let checked = CheckedRequirements {
        min_memory: min_memory(spec, &mut problems),
        min_compute_capability: min_compute_capability(spec, &mut problems),
    };
    let mig_profile = spec.nvidia.as_ref().and_then(|n| n.mig.as_ref());
    match (spec.device_type, mig_profile) {
        (ClassDeviceType::Mig, None) => problems.push("nvidia.mig.profile is required with deviceType MIG".into()),
        (ClassDeviceType::Mig, Some(mig)) if mig.profile.is_empty() => {
            problems.push("nvidia.mig.profile must name a MIG profile such as 2g.12gb".into())
        }
        (ClassDeviceType::Physical, Some(_)) => problems.push("nvidia.mig is allowed only with deviceType MIG".into()),
        _ => {}
    }
    if let Some(sharing) = &spec.sharing {
        if spec.device_type == ClassDeviceType::Mig {
            problems.push("sharing applies to deviceType Physical only: a MIG partition is never shared".into());
        }
        if sharing.time_slicing.is_some() && sharing.strategy != SharingStrategy::TimeSlicing {
            problems.push("sharing.timeSlicing is allowed only with sharing.strategy TimeSlicing".into());
        }
        if sharing.mps.is_some() && sharing.strategy != SharingStrategy::Mps {
            problems.push("sharing.mps is allowed only with sharing.strategy MPS".into());
        }
        let percent = sharing.mps.as_ref().and_then(|m| m.default_active_thread_percentage);
        if percent.is_some_and(|p| !(1..=100).contains(&p)) {
            problems.push("sharing.mps.defaultActiveThreadPercentage must be from 1 to 100".into());
        }
    }
    let exclusive = spec
        .sharing
        .as_ref()
        .is_none_or(|s| s.strategy == SharingStrategy::Exclusive);
    if spec.vfio == Some(true) && (spec.device_type != ClassDeviceType::Physical || !exclusive) {
        problems
            .push("vfio needs deviceType Physical and sharing Exclusive: a virtual machine gets a whole card".into());
    }
    for (key, value) in spec.selector.iter().flat_map(|s| &s.match_labels) {
        if let Err(reason) = label_key(key) {
            problems.push(format!("selector.matchLabels: key {key:?} {reason}"));
        }
        if !is_label_value(value) {
            problems.push(format!(
                "selector.matchLabels[{key}]: value {value:?} is not a label value (at most 63 of [A-Za-z0-9._-], \
                 alphanumeric at both ends)"
            ));
        }
    }
    (problems, checked)
}

/// The extended resource name of a class named `name`, or why it cannot have one (the rules of
/// `IsExtendedResourceName`: a qualified name with a domain, outside `kubernetes.io`).
pub(crate) fn extended_resource_name(name: &str, spec: &GPUClassSpec) -> Result<String, String> {
    let resource = spec
        .extended_resource_name
        .clone()
        .unwrap_or_else(|| format!("{}/{name}", gpu_api::DRIVER_NAME));
    let field = if spec.extended_resource_name.is_some() {
        "spec.extendedResourceName"
    } else {
        "the default extended resource name (gpu.deckhouse.io/<GPUClass name>)"
    };
    let Some((domain, short)) = resource.split_once('/') else {
        return Err(format!("{field} {resource:?} needs a domain: <domain>/<name>"));
    };
    if resource.contains("kubernetes.io/") || resource.starts_with("requests.") {
        return Err(format!(
            "{field} {resource:?} must be outside kubernetes.io and not start with requests."
        ));
    }
    if !is_dns_subdomain(domain) || !is_qualified_name_part(short) {
        return Err(format!(
            "{field} {resource:?} is not <DNS subdomain>/<name of at most 63 characters of [A-Za-z0-9._-]>; \
             set spec.extendedResourceName"
        ));
    }
    Ok(resource)
}

fn min_memory(spec: &GPUClassSpec, problems: &mut Vec<String>) -> Option<String> {
    let raw = &spec.requirements.as_ref()?.min_memory.as_ref()?.0;
    match Quantity::parse(raw) {
        Ok(quantity) if quantity.sign() > 0 => Some(raw.clone()),
        Ok(_) => {
            problems.push(format!("requirements.minMemory {raw:?} must be positive"));
            None
        }
        Err(error) => {
            problems.push(format!(
                "requirements.minMemory {raw:?} is not a quantity such as 24Gi: {error}"
            ));
            None
        }
    }
}

fn min_compute_capability(spec: &GPUClassSpec, problems: &mut Vec<String>) -> Option<(u32, u32)> {
    let raw = spec.requirements.as_ref()?.min_compute_capability.as_ref()?;
    let parsed = raw
        .split_once('.')
        .and_then(|(major, minor)| Some((major.parse().ok()?, minor.parse().ok()?)));
    if parsed.is_none() {
        problems.push(format!(
            "requirements.minComputeCapability {raw:?} must be <major>.<minor>, e.g. 8.0"
        ));
    }
    parsed
}

fn label_key(key: &str) -> Result<(), &'static str> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if prefix.is_some_and(|p| !is_dns_subdomain(p)) {
        return Err("has a prefix that is not a DNS subdomain");
    }
    if !is_qualified_name_part(name) {
        return Err("is not a label key ([prefix/]name, the name at most 63 of [A-Za-z0-9._-])");
    }
    Ok(())
}

fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_qualified_name_part(value)
}

/// At most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both ends.
fn is_qualified_name_part(name: &str) -> bool {
    let edges_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !name.is_empty()
        && name.len() <= 63
        && edges_ok(name.chars().next())
        && edges_ok(name.chars().last())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests;
