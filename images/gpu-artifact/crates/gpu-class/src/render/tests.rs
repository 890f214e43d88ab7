use dra_cel::KubernetesRelease;
use gpu_api::opaque_config::SharingStrategy;
use gpu_api::{
    AllocationPolicy, ClassMps, ClassSharing, GpuVendor, MigClassSettings, NvidiaClassSettings, PhysicalGpuSelector,
    Requirements,
};
use k8s_openapi::api::resource::v1::Device;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::*;

fn class(name: &str, spec: GPUClassSpec) -> GPUClass {
    let mut class = GPUClass::new(name, spec);
    class.metadata.uid = Some(format!("uid-{name}"));
    class
}

/// A device as our publisher writes it: `attributes` in our domain, memory in bytes.
fn device(name: &str, attributes: Value, memory_gib: u64) -> Device {
    let attributes: serde_json::Map<String, Value> = attributes
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let typed = match v {
                Value::Bool(_) => json!({"bool": v}),
                Value::Number(_) => json!({"int": v}),
                _ => json!({"string": v}),
            };
            (format!("gpu.deckhouse.io/{k}"), typed)
        })
        .collect();
    serde_json::from_value(json!({
        "name": name,
        "attributes": attributes,
        "capacity": {"gpu.deckhouse.io/memory": {"value": (memory_gib << 30).to_string()}},
    }))
    .unwrap()
}

fn a30_offers() -> Vec<Device> {
    let common = json!({"vendor": "nvidia", "device": "a30-pcie", "physicalGPU": "w1-0-10de-20b7", "ccMajor": 8, "ccMinor": 0, "baremetal": true});
    let with = |extra: Value| {
        let mut attributes = common.clone();
        attributes
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        attributes
    };
    vec![
        device(
            "gpu0",
            with(json!({"deviceType": "Physical", "sharing": "Exclusive"})),
            24,
        ),
        device(
            "gpu0-mps",
            with(json!({"deviceType": "Physical", "sharing": "MPS"})),
            24,
        ),
        device(
            "gpu0-mig-2g12gb-0",
            with(json!({"deviceType": "MIG", "sharing": "Exclusive", "migProfile": "2g.12gb"})),
            11,
        ),
    ]
}

/// Names of the offers every selector of `rendered` matches, evaluated in order as the scheduler does.
fn matching(rendered: &Rendered, offers: &[Device]) -> Vec<String> {
    let cel = SelectorCache::for_release(KubernetesRelease::V1_34);
    let selectors: Vec<String> = rendered
        .device_class
        .spec
        .selectors
        .iter()
        .flatten()
        .map(|s| s.cel.as_ref().unwrap().expression.clone())
        .collect();
    offers
        .iter()
        .filter(|offer| {
            let context = cel.device_context("gpu.deckhouse.io", offer).unwrap();
            selectors
                .iter()
                .all(|expression| cel.get_or_compile(expression).unwrap().matches(&context).unwrap())
        })
        .map(|offer| offer.name.clone())
        .collect()
}

/// The parameters of the rendered DeviceClass's one opaque config.
fn opaque_parameters(rendered: &Rendered) -> &Value {
    &rendered.device_class.spec.config.as_ref().unwrap()[0]
        .opaque
        .as_ref()
        .unwrap()
        .parameters
        .0
}

fn render_34(class: &GPUClass, gpus: &[&PhysicalGPU]) -> Result<Rendered, Vec<String>> {
    render(class, gpus, &SelectorCache::for_release(KubernetesRelease::V1_34))
}

#[test]
fn a_whole_card_class_renders_an_owned_device_class_with_its_extended_resource() {
    let rendered = render_34(&class("a30", GPUClassSpec::default()), &[]).unwrap();
    let dc = &rendered.device_class;
    assert_eq!(dc.metadata.name.as_deref(), Some("a30"));
    let owner = &dc.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("GPUClass", "uid-a30", Some(true))
    );
    assert_eq!(dc.spec.extended_resource_name.as_deref(), Some("gpu.deckhouse.io/a30"));
    assert_eq!(
        dc.metadata.annotations.as_ref().unwrap()[labels::ALLOCATION_POLICY_ANNOTATION],
        "BestFit"
    );
    let config = &dc.spec.config.as_ref().unwrap()[0].opaque.as_ref().unwrap();
    assert_eq!(config.driver, "gpu.deckhouse.io");
    assert_eq!(
        config.parameters.0,
        json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "GpuConfig", "sharing": {"strategy": "Exclusive"}})
    );
    assert_eq!(matching(&rendered, &a30_offers()), ["gpu0"]);
}

#[test]
fn a_mig_class_selects_its_profile_and_a_shared_class_its_strategy() {
    let mig = GPUClassSpec {
        device_type: ClassDeviceType::Mig,
        nvidia: Some(NvidiaClassSettings {
            mig: Some(MigClassSettings {
                profile: "2g.12gb".into(),
            }),
        }),
        ..GPUClassSpec::default()
    };
    let rendered = render_34(&class("mig", mig), &[]).unwrap();
    assert_eq!(matching(&rendered, &a30_offers()), ["gpu0-mig-2g12gb-0"]);
    let parameters = opaque_parameters(&rendered);
    assert_eq!(parameters["kind"], "MigDeviceConfig");

    let mps = GPUClassSpec {
        sharing: Some(ClassSharing {
            strategy: SharingStrategy::Mps,
            mps: Some(ClassMps {
                default_active_thread_percentage: Some(40),
            }),
            ..ClassSharing::default()
        }),
        allocation_policy: Some(AllocationPolicy::FirstFit),
        ..GPUClassSpec::default()
    };
    let rendered = render_34(&class("mps", mps), &[]).unwrap();
    assert_eq!(matching(&rendered, &a30_offers()), ["gpu0-mps"]);
    let parameters = opaque_parameters(&rendered);
    assert_eq!(
        parameters["sharing"],
        json!({"strategy": "MPS", "mps": {"defaultActiveThreadPercentage": 40}})
    );
    assert_eq!(
        rendered.device_class.metadata.annotations.as_ref().unwrap()[labels::ALLOCATION_POLICY_ANNOTATION],
        "FirstFit"
    );
}

#[test]
fn requirements_and_labels_narrow_the_class_and_twelve_gib_misses_a_twelve_gb_profile() {
    let spec = |memory: &str, cc: &str| GPUClassSpec {
        vendor: Some(GpuVendor::Nvidia),
        requirements: Some(Requirements {
            min_memory: Some(Quantity(memory.into())),
            min_compute_capability: Some(cc.into()),
        }),
        selector: Some(PhysicalGpuSelector {
            match_labels: [(labels::DEVICE.to_owned(), "a30-pcie".to_owned())].into(),
        }),
        ..GPUClassSpec::default()
    };
    let gpu = {
        let mut gpu = PhysicalGPU::new("w1-0-10de-20b7", Default::default());
        gpu.metadata.labels = Some([(labels::DEVICE.to_owned(), "a30-pcie".to_owned())].into());
        gpu
    };
    let fits = render_34(&class("a", spec("24Gi", "8.0")), &[&gpu]).unwrap();
    assert_eq!(matching(&fits, &a30_offers()), ["gpu0"]);
    assert!(fits.selection.missing_keys.is_empty());
    assert!(
        matching(
            &render_34(&class("b", spec("25Gi", "8.0")), &[&gpu]).unwrap(),
            &a30_offers()
        )
        .is_empty()
    );
    assert!(
        matching(
            &render_34(&class("c", spec("1Gi", "8.6")), &[&gpu]).unwrap(),
            &a30_offers()
        )
        .is_empty()
    );

    let twelve = GPUClassSpec {
        device_type: ClassDeviceType::Mig,
        nvidia: Some(NvidiaClassSettings {
            mig: Some(MigClassSettings {
                profile: "2g.12gb".into(),
            }),
        }),
        requirements: Some(Requirements {
            min_memory: Some(Quantity("12Gi".into())),
            min_compute_capability: None,
        }),
        ..GPUClassSpec::default()
    };
    assert!(matching(&render_34(&class("d", twelve), &[]).unwrap(), &a30_offers()).is_empty());
}

#[test]
fn a_vm_class_carries_vfio_and_wants_bare_metal() {
    let rendered = render_34(
        &class(
            "vm",
            GPUClassSpec {
                vfio: Some(true),
                ..GPUClassSpec::default()
            },
        ),
        &[],
    )
    .unwrap();
    let parameters = opaque_parameters(&rendered);
    assert_eq!(
        *parameters,
        json!({"apiVersion": "resource.gpu.deckhouse.io/v1alpha1", "kind": "VfioDeviceConfig"})
    );
    let mut offers = a30_offers();
    assert_eq!(matching(&rendered, &offers), ["gpu0"]);
    // A card whose node is a virtual machine, or whose node could not tell, is left out.
    offers[0]
        .attributes
        .as_mut()
        .unwrap()
        .remove("gpu.deckhouse.io/baremetal");
    assert!(matching(&rendered, &offers).is_empty());
}

#[test]
fn problems_are_all_reported_and_nothing_is_rendered() {
    let spec = GPUClassSpec {
        requirements: Some(Requirements {
            min_memory: Some(Quantity("lots".into())),
            min_compute_capability: None,
        }),
        extended_resource_name: Some("gpu".into()),
        ..GPUClassSpec::default()
    };
    let problems = render_34(&class("bad", spec), &[]).unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
}

#[test]
fn selectors_too_long_for_the_api_server_are_refused_with_a_hint() {
    let gpus: Vec<PhysicalGPU> = (0..500)
        .map(|i| {
            let mut gpu = PhysicalGPU::new(&format!("node-{i:03}-0-10de-2330"), Default::default());
            gpu.metadata.labels = Some([("team".to_owned(), "ml".to_owned())].into());
            gpu
        })
        .collect();
    let refs: Vec<_> = gpus.iter().collect();
    let spec = GPUClassSpec {
        selector: Some(PhysicalGpuSelector {
            match_labels: [("team".to_owned(), "ml".to_owned())].into(),
        }),
        ..GPUClassSpec::default()
    };
    let problems = render_34(&class("team", spec), &refs).unwrap_err();
    assert!(
        problems[0].contains("longer than 10240") && problems[0].contains("500 PhysicalGPUs"),
        "{problems:?}"
    );
}
