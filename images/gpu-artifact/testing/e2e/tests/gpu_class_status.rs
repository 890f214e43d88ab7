//! What gpu-controller tells an admin about GPUClasses that cannot work, and what it never does:
//! the API server refuses what the CRD can check; a class the controller finds invalid is
//! Ready=False with the field at fault and gets no DeviceClass; a second class asking for an
//! extended resource name the first holds keeps its DeviceClass, rendered without the name, and
//! names the first (it gets the name once the first is gone); a DeviceClass someone else wrote that
//! takes a working class's extended resource name leaves that class its DeviceClass, Ready with the
//! reason ExtendedResourceConflict, and claims naming it are still allocated (issue 31, item 7); a
//! DeviceClass of the same name someone else wrote is left alone and the class says so; a hand edit
//! of a rendered DeviceClass is put back.

mod support;

use std::collections::BTreeMap;

use gpu_api::GPUClass;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::components::{install_crds, start_controller};
use support::gpu_classes::*;
use support::{allocated_devices, bound_pod, create, device_class, pod, slice};
use testbed::{ReadyNode, TestNamespace};

fn selectors(dc: &DeviceClass) -> Vec<String> {
    dc.spec
        .selectors
        .iter()
        .flatten()
        .map(|s| s.cel.as_ref().unwrap().expression.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_conflicting_foreign_and_hand_edited_classes() {
    let ns = TestNamespace::create("gpuclass-status").await.unwrap();
    install_crds(&ns.client()).await;
    let dir = tempfile::tempdir().unwrap();
    let (controller, _) = start_controller(&ns, dir.path(), "Debug", true).await;
    let classes = Api::<GPUClass>::all(ns.client());

    // What the CRD checks, the API server refuses with the rule's message.
    for (spec, message) in [
        (
            json!({"deviceType": "MIG"}),
            "nvidia.mig.profile is required with deviceType MIG",
        ),
        (
            json!({"deviceType": "MIG", "nvidia": {"mig": {"profile": "1g.6gb"}}, "sharing": {"strategy": "MPS"}}),
            "sharing applies to deviceType Physical only",
        ),
        (
            json!({"deviceType": "Physical", "vfio": true, "sharing": {"strategy": "TimeSlicing"}}),
            "vfio needs deviceType Physical and sharing Exclusive",
        ),
        (
            json!({"deviceType": "Physical", "requirements": {"minMemory": "lots"}}),
            "positive quantity",
        ),
    ] {
        let refused = classes
            .create(&PostParams::default(), &class_object(&ns, "refused", spec))
            .await;
        match refused {
            Err(kube::Error::Api(status)) if status.code == 422 => {
                assert!(status.message.contains(message), "{}", status.message)
            }
            other => panic!("expected the CRD to refuse it ({message}): {other:?}"),
        }
    }

    // What only the controller sees: a label key that is not a label key.
    let invalid = create_class(
        &ns,
        "invalid",
        json!({"deviceType": "Physical", "selector": {"matchLabels": {"Bad_Prefix/model": "a30"}}}),
    )
    .await;
    let class = wait_ready(&classes, &invalid, "False", "Invalid").await;
    let message = ready_of(&class).unwrap().2;
    assert!(message.contains("\"Bad_Prefix/model\""), "{message}");
    assert!(class.status.unwrap().generated.is_none());
    assert!(
        Api::<DeviceClass>::all(ns.client())
            .get_opt(&invalid)
            .await
            .unwrap()
            .is_none()
    );

    // One extended resource name, two classes: the first keeps it.
    let shared = format!("gpu.deckhouse.io/{}-shared", ns.name());
    let first = create_class(
        &ns,
        "first",
        json!({"deviceType": "Physical", "extendedResourceName": shared}),
    )
    .await;
    wait_ready(&classes, &first, "False", "NoMatchingDevices").await;
    wait_device_class(
        &ns,
        &first,
        Some(&|dc| dc.spec.extended_resource_name.as_deref() == Some(shared.as_str())),
    )
    .await;
    let second = create_class(
        &ns,
        "second",
        json!({"deviceType": "MIG", "nvidia": {"mig": {"profile": "1g.6gb"}}, "extendedResourceName": shared}),
    )
    .await;
    let class = wait_ready(&classes, &second, "False", "NoMatchingDevices").await;
    let message = ready_of(&class).unwrap().2;
    assert!(message.contains(&format!("belongs to GPUClass {first}")), "{message}");
    wait_device_class(
        &ns,
        &second,
        Some(&|dc| dc.spec.extended_resource_name.is_none() && !selectors(dc).is_empty()),
    )
    .await;
    classes.delete(&first, &DeleteParams::default()).await.unwrap();
    wait_ready(&classes, &second, "False", "NoMatchingDevices").await;
    wait_device_class(
        &ns,
        &second,
        Some(&|dc| dc.spec.extended_resource_name.as_deref() == Some(shared.as_str())),
    )
    .await;

    // A DeviceClass someone else wrote takes the extended resource name of a class that works: the
    // class keeps its DeviceClass without the name, stays Ready and says why; claims naming it are
    // allocated as before.
    let node = ReadyNode::register(&ns, "card", BTreeMap::new()).await.unwrap();
    let card = json!({"devices": [{"name": "gpu0", "attributes": {
        "gpu.deckhouse.io/deviceType": {"string": "Physical"}, "gpu.deckhouse.io/sharing": {"string": "Exclusive"}}}]});
    create(
        &Api::<ResourceSlice>::all(ns.client()),
        &slice(&ns, "card", node.name(), 1, card),
    )
    .await;
    let working = create_class(&ns, "working", json!({"deviceType": "Physical"})).await;
    wait_ready(&classes, &working, "True", "DeviceClassReady").await;
    let resource = format!("gpu.deckhouse.io/{working}");
    let taker = device_class(&ns, "taker", r#"device.driver == "example.com""#, Some(&resource));
    let taker = create(&Api::<DeviceClass>::all(ns.client()), &taker).await.name_any();
    let class = wait_ready(&classes, &working, "True", "ExtendedResourceConflict").await;
    let message = ready_of(&class).unwrap().2;
    assert!(
        message.contains(&format!("belongs to DeviceClass {taker}")),
        "{message}"
    );
    wait_device_class(&ns, &working, Some(&|dc| dc.spec.extended_resource_name.is_none())).await;
    let claim: ResourceClaim = serde_json::from_value(json!({"apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim", "metadata": {"name": "names-working"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": working}}]}}}))
    .unwrap();
    create(&ns.api::<ResourceClaim>(), &claim).await;
    let uses = json!({"resourceClaims": [{"name": "gpu", "resourceClaimName": "names-working"}]});
    let user = pod("user", node.name(), json!({"claims": [{"name": "gpu"}]}), uses);
    create(&ns.api::<Pod>(), &user).await;
    bound_pod(&ns, "user").await;
    let allocated = ns.api::<ResourceClaim>().get("names-working").await.unwrap();
    assert_eq!(
        allocated_devices(&allocated),
        vec![(format!("gpus/{}", node.name()), "gpu0".to_owned())]
    );

    // A DeviceClass someone else wrote under the class's name is never touched.
    let foreign = device_class(&ns, "foreign", r#"device.driver == "example.com""#, None);
    create(&Api::<DeviceClass>::all(ns.client()), &foreign).await;
    let name = create_class(&ns, "foreign", json!({"deviceType": "Physical"})).await;
    let class = wait_ready(&classes, &name, "False", "DeviceClassNotManaged").await;
    assert!(ready_of(&class).unwrap().2.contains("was not made from this GPUClass"));
    let untouched = Api::<DeviceClass>::all(ns.client()).get(&name).await.unwrap();
    assert_eq!(selectors(&untouched), [r#"device.driver == "example.com""#]);
    assert!(untouched.metadata.owner_references.is_none());

    // A hand edit of a rendered DeviceClass is put back.
    let edited = create_class(&ns, "edited", json!({"deviceType": "Physical"})).await;
    let rendered = wait_device_class(&ns, &edited, Some(&|_| true)).await.unwrap();
    let owner = &rendered.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("GPUClass", edited.as_str(), Some(true))
    );
    Api::<DeviceClass>::all(ns.client())
        .patch(
            &edited,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"selectors": [{"cel": {"expression": "true"}}], "extendedResourceName": null}}),
            ),
        )
        .await
        .unwrap();
    let want = selectors(&rendered);
    let back = wait_device_class(&ns, &edited, Some(&|dc| selectors(dc) == want))
        .await
        .unwrap();
    assert_eq!(
        back.spec.extended_resource_name,
        Some(format!("gpu.deckhouse.io/{edited}")),
        "--- controller log ---\n{}",
        controller.log()
    );
}
