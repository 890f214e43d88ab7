//! Who owns what a GPUClass wants: the DeviceClass of its name (ours only when a GPUClass of that
//! name made it; a DeviceClass someone else wrote is never overwritten) and its extended resource
//! name (one class per name: Kubernetes would silently pick one of two DeviceClasses that share it,
//! the newest, so the first GPUClass to want a name keeps it, and a DeviceClass not made from a
//! GPUClass that already declares it keeps it too).

use std::fmt;

use gpu_api::GPUClass;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::ResourceExt;

use crate::validation::extended_resource_name;

/// The field manager gpu-controller writes DeviceClasses and GPUClass status with.
pub const FIELD_MANAGER: &str = "gpu-controller";

/// Whether `device_class` was made from the GPUClass named `gpu_class`: it names that GPUClass as
/// an owner, or our field manager applied it. Anything else is someone else's.
pub fn made_from(device_class: &DeviceClass, gpu_class: &str) -> bool {
    let owned = device_class.owner_references().iter().any(|owner| {
        owner.kind == "GPUClass" && owner.api_version.starts_with("gpu.deckhouse.io/") && owner.name == gpu_class
    });
    let applied = device_class
        .managed_fields()
        .iter()
        .any(|entry| entry.manager.as_deref() == Some(FIELD_MANAGER) && entry.operation.as_deref() == Some("Apply"));
    owned || applied
}

/// Whether any GPUClass made `device_class`.
fn made_from_any_gpu_class(device_class: &DeviceClass) -> bool {
    made_from(device_class, &device_class.name_any())
}

/// Who keeps an extended resource name another class wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceHolder {
    /// An earlier GPUClass.
    GpuClass(String),
    /// A DeviceClass not made from a GPUClass.
    DeviceClass(String),
}

impl fmt::Display for ResourceHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceHolder::GpuClass(name) => write!(f, "GPUClass {name}"),
            ResourceHolder::DeviceClass(name) => write!(f, "DeviceClass {name}"),
        }
    }
}

/// Who keeps `resource`, when it is not `class`: the first GPUClass that wants it (by creation
/// time, then name; classes being deleted let go), or a DeviceClass not made from a GPUClass that
/// declares it.
pub fn resource_holder(
    class: &GPUClass,
    resource: &str,
    classes: &[&GPUClass],
    device_classes: &[&DeviceClass],
) -> Option<ResourceHolder> {
    let foreign = device_classes.iter().find(|dc| {
        dc.name_any() != class.name_any()
            && dc.spec.extended_resource_name.as_deref() == Some(resource)
            && !made_from_any_gpu_class(dc)
    });
    if let Some(device_class) = foreign {
        return Some(ResourceHolder::DeviceClass(device_class.name_any()));
    }
    let key = |c: &GPUClass| (c.creation_timestamp().map(|t| t.0), c.name_any());
    classes
        .iter()
        .filter(|other| other.metadata.deletion_timestamp.is_none())
        .filter(|other| extended_resource_name(&other.name_any(), &other.spec).as_deref() == Ok(resource))
        .min_by_key(|other| key(other))
        .filter(|first| first.name_any() != class.name_any() && key(first) < key(class))
        .map(|first| ResourceHolder::GpuClass(first.name_any()))
}

#[cfg(test)]
mod tests;
