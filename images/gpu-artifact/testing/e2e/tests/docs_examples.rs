//! Every manifest of `docs/examples/` is accepted by the real API server (server-side dry-run apply in a
//! test namespace): DeviceClass CEL compiles, claim templates and Pods are valid as written.

mod support;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use support::examples::documented_examples;
use testbed::TestNamespace;

#[tokio::test]
async fn the_api_server_accepts_every_documented_example() {
    let ns = TestNamespace::create("docs-examples").await.unwrap();
    let mut applied = Vec::new();
    for example in documented_examples(&ns).await {
        example
            .api
            .patch(
                &example.object.name_any(),
                &PatchParams::apply("docs-examples").dry_run(),
                &Patch::Apply(&example.object),
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {} rejected: {e}", example.file.display(), example.label));
        applied.push(example.label);
    }
    assert_eq!(
        applied,
        [
            "DeviceClass/a30",
            "DeviceClass/h100",
            "DeviceClass/mig-2g12gb",
            "DeviceClass/gpu-mps",
            "DeviceClass/gpu-vfio",
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
