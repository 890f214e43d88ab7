use k8s_openapi::api::resource::v1::DeviceClass;
use serde_json::{Value, json};

use super::*;
use crate::gate_classes::BEST_FIT_ANNOTATION;

fn classes() -> GateClasses {
    let class = |name: &str, driver: &str, annotations: Value, extended: Option<&str>| -> DeviceClass {
        serde_json::from_value(json!({"metadata": {"name": name, "annotations": annotations},
            "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}],
                     "extendedResourceName": extended}}))
        .unwrap()
    };
    GateClasses::new(&[
        class("gpu", "gpu.deckhouse.io", json!({}), Some("gpu.deckhouse.io/gpu")),
        class(
            "first-fit",
            "gpu.deckhouse.io",
            json!({BEST_FIT_ANNOTATION: "false"}),
            None,
        ),
        class("nic", "net.example.com", json!({}), None),
    ])
}

fn pod(spec: Value) -> Pod {
    let mut spec = spec;
    spec["containers"] = spec.get("containers").cloned().unwrap_or(json!([{"name": "c"}]));
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec})).unwrap()
}

fn claims_pod() -> Pod {
    pod(json!({"resourceClaims": [
        {"name": "a", "resourceClaimName": "shared"},
        {"name": "b", "resourceClaimTemplateName": "one-gpu"}]}))
}

#[test]
fn sources_are_the_named_claims_and_templates() {
    assert_eq!(
        claim_sources(&claims_pod()),
        [
            ClaimSource::Claim("shared".into()),
            ClaimSource::Template("one-gpu".into())
        ]
    );
}

#[test]
fn request_classes_include_first_available() {
    let claim: DeviceClaim = serde_json::from_value(json!({"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu"}},
        {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "first-fit"}, {"name": "y", "deviceClassName": "nic"}]}]}))
    .unwrap();
    assert_eq!(request_classes(Some(&claim)), ["gpu", "first-fit", "nic"]);
    assert!(request_classes(None).is_empty());
}

#[test]
fn a_template_or_claim_of_a_best_fit_class_gates() {
    let template = (ClaimSource::Template("one-gpu".into()), Some(vec!["gpu".to_owned()]));
    let other = (ClaimSource::Claim("shared".into()), Some(vec!["nic".to_owned()]));
    let decision = decide(&claims_pod(), "ns", &classes(), &[other.clone(), template]);
    assert_eq!(
        decision,
        GateDecision::Gate("ResourceClaimTemplate one-gpu requests class gpu".into())
    );
    let direct = (
        ClaimSource::Claim("shared".into()),
        Some(vec!["nic".to_owned(), "gpu".to_owned()]),
    );
    assert_eq!(
        decide(&claims_pod(), "ns", &classes(), &[direct]),
        GateDecision::Gate("ResourceClaim shared requests class gpu".into())
    );
    assert!(matches!(
        decide(&claims_pod(), "ns", &classes(), &[other]),
        GateDecision::Leave(_)
    ));
}

#[test]
fn opted_out_unknown_and_unreadable_classes_do_not_gate() {
    let sources = [
        (
            ClaimSource::Template("one-gpu".into()),
            Some(vec!["first-fit".to_owned()]),
        ),
        (ClaimSource::Claim("shared".into()), None),
        (ClaimSource::Claim("other".into()), Some(vec!["missing".to_owned()])),
    ];
    assert!(matches!(
        decide(&claims_pod(), "ns", &classes(), &sources),
        GateDecision::Leave(_)
    ));
}

#[test]
fn an_extended_resource_alone_never_gates_and_the_reason_says_who_places_it() {
    let explicit = pod(json!({"containers": [{"name": "c", "resources": {"limits": {"gpu.deckhouse.io/gpu": "1"}}}]}));
    assert_eq!(
        decide(&explicit, "ns", &classes(), &[]),
        GateDecision::Leave(format!(
            "extended resource gpu.deckhouse.io/gpu of class gpu is placed by the kube-scheduler: {EXTENDED_RESOURCE_PLACEMENT}"
        ))
    );
    let implicit = pod(json!({"containers": [{"name": "c"}], "initContainers": [{"name": "i",
        "resources": {"requests": {"deviceclass.resource.kubernetes.io/gpu": "1"}}}]}));
    let GateDecision::Leave(reason) = decide(&implicit, "ns", &classes(), &[]) else {
        panic!("an implicit extended resource gated its Pod")
    };
    assert!(
        reason.contains("deviceclass.resource.kubernetes.io/gpu of class gpu"),
        "{reason}"
    );
    let opted_out = pod(json!({"containers": [{"name": "c",
        "resources": {"limits": {"deviceclass.resource.kubernetes.io/first-fit": "1", "cpu": "1"}}}]}));
    assert_eq!(
        decide(&opted_out, "ns", &classes(), &[]),
        GateDecision::Leave("no claim of a best-fit class of gpu.deckhouse.io".into())
    );
}

#[test]
fn a_best_fit_claim_still_gates_a_pod_that_also_asks_for_an_extended_resource() {
    let mut both = claims_pod();
    both.spec.as_mut().unwrap().containers[0].resources =
        Some(serde_json::from_value(json!({"limits": {"gpu.deckhouse.io/gpu": "1"}})).unwrap());
    let sources = [(ClaimSource::Template("one-gpu".into()), Some(vec!["gpu".into()]))];
    assert_eq!(
        decide(&both, "ns", &classes(), &sources),
        GateDecision::Gate("ResourceClaimTemplate one-gpu requests class gpu".into())
    );
}

#[test]
fn exempt_bound_and_already_gated_pods_are_left_alone() {
    let template = [(ClaimSource::Template("one-gpu".into()), Some(vec!["gpu".to_owned()]))];
    for namespace in ["kube-system", "d8-gpu"] {
        assert!(matches!(
            decide(&claims_pod(), namespace, &classes(), &template),
            GateDecision::Leave(_)
        ));
    }
    let mut bound = claims_pod();
    bound.spec.as_mut().unwrap().node_name = Some("n1".into());
    assert!(matches!(
        decide(&bound, "ns", &classes(), &template),
        GateDecision::Leave(_)
    ));
    let gated = pod(json!({"schedulingGates": [{"name": "gpu.deckhouse.io/allocation"}]}));
    assert!(matches!(
        decide(&gated, "ns", &classes(), &template),
        GateDecision::Leave(_)
    ));
}

#[test]
fn the_patch_adds_the_gate_beside_other_gates_and_labels_the_pod() {
    let applied = |pod: &Pod| {
        let mut applied = serde_json::to_value(pod).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(gate_patch(pod)).unwrap();
        json_patch::patch(&mut applied, &patch).unwrap();
        applied
    };
    let bare = applied(&claims_pod());
    assert_eq!(
        bare["spec"]["schedulingGates"],
        json!([{"name": "gpu.deckhouse.io/allocation"}])
    );
    assert_eq!(
        bare["metadata"]["labels"],
        json!({"gpu.deckhouse.io/allocation-gate": "true"})
    );
    let mut other = pod(json!({"schedulingGates": [{"name": "example.com/quota"}]}));
    other.metadata.labels = Some([("app".to_owned(), "x".to_owned())].into());
    let other = applied(&other);
    let names: Vec<_> = other["spec"]["schedulingGates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].clone())
        .collect();
    assert_eq!(
        names,
        [json!("example.com/quota"), json!("gpu.deckhouse.io/allocation")]
    );
    assert_eq!(
        other["metadata"]["labels"],
        json!({"app": "x", "gpu.deckhouse.io/allocation-gate": "true"})
    );
}
