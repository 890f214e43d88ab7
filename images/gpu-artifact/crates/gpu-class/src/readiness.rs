//! The `Ready` condition of a GPUClass, from what the controller found: the virtualization module
//! waits for Ready=True before it builds a VM's claims, so False must say what the admin changes.
//! The first matching cause wins, in this order: the spec is invalid, the DeviceClass of the name is
//! someone else's, the API server refused the DeviceClass, a label key no PhysicalGPU carries, a
//! selector that fails on a published device, no device of the class is published or allocated.
//!
//! An extended resource name another class holds stops nothing: the DeviceClass is rendered without
//! it, and claims naming the class work as before. A class that is otherwise ready stays Ready=True
//! with the reason `ExtendedResourceConflict` (a conflict never takes a working class away from the
//! virtualization module); one that is not says the conflict beside its own reason.

use gpu_api::ClassDeviceCounts;

use crate::ownership::ResourceHolder;

pub const READY: &str = "Ready";

/// Condition reasons.
pub mod reasons {
    pub const READY: &str = "DeviceClassReady";
    pub const INVALID: &str = "Invalid";
    pub const DEVICE_CLASS_NOT_MANAGED: &str = "DeviceClassNotManaged";
    pub const EXTENDED_RESOURCE_CONFLICT: &str = "ExtendedResourceConflict";
    pub const APPLY_FAILED: &str = "ApplyFailed";
    pub const LABEL_NOT_FOUND: &str = "LabelNotFound";
    pub const SELECTOR_ERROR: &str = "SelectorError";
    pub const NO_MATCHING_DEVICES: &str = "NoMatchingDevices";
}

/// What stopped the class from being rendered, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Blocker {
    Invalid(Vec<String>),
    /// A DeviceClass of the class's name that no GPUClass made.
    DeviceClassNotManaged,
    ApplyFailed(String),
}

/// An extended resource name the class wants and another holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceConflict {
    pub resource: String,
    pub holder: ResourceHolder,
}

/// What the controller found about one class.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassFindings {
    pub name: String,
    pub blocker: Option<Blocker>,
    pub missing_label_keys: Vec<String>,
    /// The first CEL error a selector gave on a published device.
    pub selector_error: Option<String>,
    pub counts: ClassDeviceCounts,
    /// The extended resource Pods ask for; `None` when the server dropped it or another holds it.
    pub extended_resource_name: Option<String>,
    /// The extended resource name the class wants, when another class holds it.
    pub conflict: Option<ResourceConflict>,
}

/// The Ready condition without its timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

impl Verdict {
    fn not_ready(reason: &'static str, message: String) -> Verdict {
        Verdict {
            status: "False",
            reason,
            message,
        }
    }

    /// Whether the admin should hear of it as a warning: not ready, or ready with a conflict.
    pub fn is_warning(&self) -> bool {
        self.status != "True" || self.reason == reasons::EXTENDED_RESOURCE_CONFLICT
    }
}

pub fn ready_condition(findings: &ClassFindings) -> Verdict {
    let verdict = ready_without_conflict(findings);
    let Some(ResourceConflict { resource, holder }) = &findings.conflict else {
        return verdict;
    };
    let conflict = format!(
        "extended resource {resource} belongs to {holder}, so DeviceClass {} is rendered without it: claims naming \
         the class work, Pods asking for {resource} get {holder}'s devices. Set spec.extendedResourceName to another name",
        findings.name
    );
    match verdict.status {
        "True" => Verdict {
            status: "True",
            reason: reasons::EXTENDED_RESOURCE_CONFLICT,
            message: format!("{conflict}; {}", counts_note(findings.counts)),
        },
        _ => Verdict {
            message: format!("{}; {conflict}", verdict.message),
            ..verdict
        },
    }
}

fn counts_note(counts: ClassDeviceCounts) -> String {
    format!(
        "{} devices published, {} allocated, {} free",
        counts.published, counts.allocated, counts.free
    )
}

fn ready_without_conflict(findings: &ClassFindings) -> Verdict {
    let name = &findings.name;
    match &findings.blocker {
        Some(Blocker::Invalid(problems)) => {
            return Verdict::not_ready(
                reasons::INVALID,
                format!("no DeviceClass is rendered: {}", problems.join("; ")),
            );
        }
        Some(Blocker::DeviceClassNotManaged) => {
            return Verdict::not_ready(
                reasons::DEVICE_CLASS_NOT_MANAGED,
                format!(
                    "DeviceClass {name} exists and was not made from this GPUClass; it is left as it is. Delete or \
                     rename that DeviceClass, or give the GPUClass another name"
                ),
            );
        }
        Some(Blocker::ApplyFailed(error)) => {
            return Verdict::not_ready(
                reasons::APPLY_FAILED,
                format!("the API server refused DeviceClass {name}: {error}"),
            );
        }
        None => {}
    }
    if !findings.missing_label_keys.is_empty() {
        return Verdict::not_ready(
            reasons::LABEL_NOT_FOUND,
            format!(
                "no PhysicalGPU carries the label {} that selector.matchLabels reads; DeviceClass {name} matches nothing",
                findings.missing_label_keys.join(", ")
            ),
        );
    }
    if let Some(error) = &findings.selector_error {
        return Verdict::not_ready(
            reasons::SELECTOR_ERROR,
            format!("DeviceClass {name} cannot be evaluated on a published device: {error}"),
        );
    }
    let counts = findings.counts;
    // A card a virtual machine holds is not published while it is on vfio-pci: a class whose
    // devices are all in use is still a class that works.
    if counts.published == 0 && counts.allocated == 0 {
        return Verdict::not_ready(
            reasons::NO_MATCHING_DEVICES,
            format!(
                "DeviceClass {name} is applied, but no published device matches it and none is allocated through it"
            ),
        );
    }
    let resource = match &findings.extended_resource_name {
        Some(resource) => format!("requested as {resource}"),
        None => "its extended resource was dropped by the API server (feature gate DRAExtendedResource off): \
                 request it through ResourceClaims"
            .to_owned(),
    };
    Verdict {
        status: "True",
        reason: reasons::READY,
        message: format!("DeviceClass {name} is applied, {resource}; {}", counts_note(counts)),
    }
}

#[cfg(test)]
mod tests;
