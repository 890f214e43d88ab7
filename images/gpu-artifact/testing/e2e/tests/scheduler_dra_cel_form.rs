//! The original specification writes attribute selectors as `device.attributes["<domain>/<name>"]`.
//! Kubernetes CEL keys attributes by domain, then name, so the API server rejects that class and
//! the user sees why at `kubectl apply` time.

mod support;

use k8s_openapi::api::resource::v1::DeviceClass;
use kube::Api;
use kube::api::PostParams;
use support::*;
use testbed::TestNamespace;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_specifications_cel_form_is_rejected_with_the_cel_error() {
    let ns = TestNamespace::create("wrong-cel").await.unwrap();
    let classes = Api::<DeviceClass>::all(ns.client());
    let wrong = device_class(
        &ns,
        "wrong",
        r#"device.attributes["gpu.deckhouse.io/deviceType"] == "Physical""#,
        None,
    );

    let error = classes.create(&PostParams::default(), &wrong).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected the API server to refuse the class, got {error:?}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert_eq!(status.reason, "Invalid", "{status:?}");
    assert!(
        status.message.contains("spec.selectors[0].cel.expression"),
        "{}",
        status.message
    );
    assert!(
        status.message.contains("no matching overload for '_==_'"),
        "{}",
        status.message
    );
    assert!(
        classes.get_opt(&ns.unique("wrong")).await.unwrap().is_none(),
        "nothing was stored"
    );

    // The right form of the same selector is accepted.
    let right = device_class(
        &ns,
        "right",
        r#"device.attributes["gpu.deckhouse.io"].deviceType == "Physical""#,
        None,
    );
    classes
        .create(&PostParams::default(), &right)
        .await
        .expect("the Kubernetes CEL form is valid");
}
