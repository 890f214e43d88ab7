//! A GPUClass turned into the DeviceClass of the same name: owned by the GPUClass, labelled for the
//! module, its selectors checked by the DRA CEL environment of the cluster's release before anyone
//! sends them, the opaque config of its sharing policy (or `VfioDeviceConfig` for a VM class) and its
//! extended resource name.

use std::collections::BTreeMap;

use dra_cel::SelectorCache;
use gpu_api::opaque_config::{OPAQUE_CONFIG_API_VERSION, SharingStrategy};
use gpu_api::{ClassDeviceType, GPUClass, GPUClassSpec, PhysicalGPU, labels};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClass, DeviceClassConfiguration, DeviceClassSpec, DeviceSelector,
    OpaqueDeviceConfiguration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::label_selection::{LabelSelection, select};
use crate::selectors::class_selectors;
use crate::validation::{check_spec, extended_resource_name};

/// On the DeviceClass: the GPUClass it was rendered from.
pub const GPU_CLASS_LABEL: &str = "gpu.deckhouse.io/gpuclass";

/// What a valid GPUClass renders to.
#[derive(Debug, Clone)]
pub struct Rendered {
    pub device_class: DeviceClass,
    pub extended_resource_name: String,
    /// How the labels resolved: [`LabelSelection::missing_keys`] matter for the Ready condition.
    pub selection: LabelSelection,
}

/// Renders `class` against the cluster's PhysicalGPUs; every problem found, when it cannot be
/// rendered. `cel` checks the selectors as the API server of the cluster's release does.
pub fn render(class: &GPUClass, gpus: &[&PhysicalGPU], cel: &SelectorCache) -> Result<Rendered, Vec<String>> {
    let name = class.name_any();
    let (mut problems, checked) = check_spec(&class.spec);
    let extended = extended_resource_name(&name, &class.spec).map_err(|problem| problems.push(problem));
    if !problems.is_empty() {
        return Err(problems);
    }
    let selection = select(&class.spec, gpus);
    let selectors = class_selectors(&class.spec, &selection, &checked);
    for (index, expression) in selectors.iter().enumerate() {
        if let Err(error) = cel.get_or_compile(expression) {
            let hint = match &selection.physical_gpus {
                Some(names) if expression.contains(".physicalGPU in [") => format!(
                    " (the class lists {} PhysicalGPUs by name and label; select by gpu.deckhouse.io/device or \
                     gpu.deckhouse.io/vendor instead)",
                    names.len()
                ),
                _ => String::new(),
            };
            problems.push(format!("rendered selector {index} is refused: {error}{hint}"));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let extended_resource_name = extended.expect("no problems means the name was valid");
    let device_class = DeviceClass {
        metadata: metadata(class),
        spec: DeviceClassSpec {
            selectors: Some(
                selectors
                    .into_iter()
                    .map(|expression| DeviceSelector {
                        cel: Some(CELDeviceSelector { expression }),
                    })
                    .collect(),
            ),
            config: Some(vec![DeviceClassConfiguration {
                opaque: Some(OpaqueDeviceConfiguration {
                    driver: gpu_api::DRIVER_NAME.to_owned(),
                    parameters: RawExtension(opaque_parameters(&class.spec)),
                }),
            }]),
            extended_resource_name: Some(extended_resource_name.clone()),
        },
    };
    Ok(Rendered {
        device_class,
        extended_resource_name,
        selection,
    })
}

fn metadata(class: &GPUClass) -> ObjectMeta {
    let name = class.name_any();
    let policy = class.spec.allocation_policy.unwrap_or_default();
    ObjectMeta {
        name: Some(name.clone()),
        labels: Some(BTreeMap::from([
            ("heritage".to_owned(), "deckhouse".to_owned()),
            ("module".to_owned(), "gpu".to_owned()),
            (GPU_CLASS_LABEL.to_owned(), name.clone()),
        ])),
        annotations: Some(BTreeMap::from([(
            labels::ALLOCATION_POLICY_ANNOTATION.to_owned(),
            policy.as_str().to_owned(),
        )])),
        owner_references: Some(vec![OwnerReference {
            api_version: "gpu.deckhouse.io/v1alpha1".to_owned(),
            kind: "GPUClass".to_owned(),
            name,
            uid: class.uid().unwrap_or_default(),
            controller: Some(true),
            block_owner_deletion: None,
        }]),
        ..ObjectMeta::default()
    }
}

/// The opaque config of the class: `VfioDeviceConfig` for a VM class, else its sharing policy.
fn opaque_parameters(spec: &GPUClassSpec) -> Value {
    let header = |kind: &str| json!({"apiVersion": OPAQUE_CONFIG_API_VERSION, "kind": kind});
    if spec.vfio == Some(true) {
        return header("VfioDeviceConfig");
    }
    if spec.device_type == ClassDeviceType::Mig {
        let mut config = header("MigDeviceConfig");
        config["sharing"] = json!({"strategy": SharingStrategy::Exclusive.as_str()});
        return config;
    }
    let mut sharing = json!({"strategy": SharingStrategy::Exclusive.as_str()});
    if let Some(class_sharing) = &spec.sharing {
        sharing["strategy"] = json!(class_sharing.strategy.as_str());
        if let Some(time_slicing) = &class_sharing.time_slicing {
            sharing["timeSlicing"] = match time_slicing.interval {
                Some(interval) => json!({"interval": interval}),
                None => json!({}),
            };
        }
        if let Some(mps) = &class_sharing.mps {
            sharing["mps"] = match mps.default_active_thread_percentage {
                Some(percent) => json!({"defaultActiveThreadPercentage": percent}),
                None => json!({}),
            };
        }
    }
    let mut config = header("GpuConfig");
    config["sharing"] = sharing;
    config
}

#[cfg(test)]
mod tests;
