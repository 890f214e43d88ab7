//! Every manifest of `docs/examples/` is accepted by the real API server (server-side dry-run apply in a
//! test namespace): GPUClasses pass the CRD's rules, DeviceClass CEL compiles, claim templates and Pods are
//! valid as written. The DeviceClass each GPUClass example renders to is accepted too, and its selectors
//! pass `dra-cel`'s check for the server's release, as gpu-controller checks them before it applies them.

mod support;

use dra_cel::{KubernetesRelease, SelectorCache};
use gpu_api::GPUClass;
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use support::components::install_crds;
use support::examples::documented_examples;
use testbed::TestNamespace;

#[tokio::test]
async fn the_api_server_accepts_every_documented_example() {
    let ns = TestNamespace::create("docs-examples").await.unwrap();
    install_crds(&ns.client()).await;
    let release = match ns.cluster().server_minor().await.unwrap() {
        34 => KubernetesRelease::V1_34,
        _ => KubernetesRelease::V1_37,
    };
    let cel = SelectorCache::for_release(release);
    let dry_run = PatchParams::apply("docs-examples").dry_run();
    let mut applied = Vec::new();
    for example in documented_examples(&ns).await {
        example
            .api
            .patch(&example.object.name_any(), &dry_run, &Patch::Apply(&example.object))
            .await
            .unwrap_or_else(|e| panic!("{}: {} rejected: {e}", example.file.display(), example.label));
        if example.label.starts_with("GPUClass/") {
            let mut class: GPUClass = serde_json::from_value(serde_json::to_value(&example.object).unwrap()).unwrap();
            class.metadata.uid = Some("00000000-0000-0000-0000-000000000000".into());
            let rendered = gpu_class::render(&class, &[], &cel)
                .unwrap_or_else(|problems| panic!("{}: {problems:?}", example.label));
            Api::<DeviceClass>::all(ns.client())
                .patch(&class.name_any(), &dry_run, &Patch::Apply(&rendered.device_class))
                .await
                .unwrap_or_else(|e| panic!("the DeviceClass of {} rejected: {e}", example.label));
        }
        applied.push(example.label);
    }
    assert_eq!(
        applied,
        [
            "GPUClass/a30",
            "GPUClass/h100",
            "GPUClass/mig-2g12gb",
            "GPUClass/gpu-mps",
            "GPUClass/gpu-vfio",
            "DeviceClass/ampere-or-hopper-570",
            "ResourceClaimTemplate/one-mig-2g12gb",
            "Pod/cuda-job-1",
            "Pod/cuda-job-2",
            "Pod/h100-job",
            "ResourceClaimTemplate/half-gpu-mps",
            "Pod/mps-worker-1",
            "Pod/mps-worker-2",
            "ResourceClaimTemplate/vfio-gpu",
            "Pod/vm-launcher"
        ]
    );
}
