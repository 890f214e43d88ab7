use super::*;
use crate::test_objects::{claim, class, device_classes, slices, slices_with_mig};
use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};

fn classes() -> Vec<DeviceClass> {
    let mut classes = device_classes();
    classes.push(class(
        "gpu-vfio",
        r#"device.attributes["gpu.deckhouse.io"].deviceType == "VFIO""#,
    ));
    classes.push(class(
        "gpu-broken",
        r#"device.attributes["gpu.deckhouse.io"].deviceType =="#,
    ));
    classes
}

/// The reason the engine gives for `pending` after `held` were allocated, with `facts`.
fn reason(slices: Vec<ResourceSlice>, held: &[ResourceClaim], pending: &ResourceClaim, facts: &NodeFacts) -> String {
    let mut engine = Allocator::new(&slices, &classes(), &[]);
    for claim in held {
        let allocation = engine.allocate(claim, None).unwrap().expect("held claim fits");
        engine.commit_claim(claim, Some(&allocation));
    }
    let why = match engine.explain(pending, 3) {
        Ok(Some(explanation)) => Unallocated::NoFit(explanation),
        Ok(None) => panic!("{} fits", pending.metadata.name.as_deref().unwrap_or_default()),
        Err(error) => Unallocated::Invalid(error),
    };
    pending_reason(&why, facts, &mig_classes(&classes()))
}

#[test]
fn no_device_of_the_class() {
    let text = reason(
        slices("n1", 1),
        &[],
        &claim("p", "gpu-vfio", 1, 1),
        &NodeFacts::default(),
    );
    assert_eq!(
        text,
        "cannot allocate: node n1: request gpu: no device of class gpu-vfio"
    );
}

#[test]
fn counters_taken_name_the_claims_holding_them() {
    let held = [claim("whole", "gpu-physical", 1, 1)];
    let text = reason(
        slices("n1", 1),
        &held,
        &claim("p", "gpu-mig", 1, 1),
        &NodeFacts::default(),
    );
    assert_eq!(
        text,
        "cannot allocate: node n1: request gpu: devices or their cards' counters taken by ns/whole"
    );
}

#[test]
fn mig_off_by_the_node_label() {
    let facts = NodeFacts {
        mig_off: BTreeSet::from(["n1".to_owned()]),
        ..NodeFacts::default()
    };
    let text = reason(
        slices_with_mig("n1", 1, false),
        &[],
        &claim("p", "gpu-mig", 1, 1),
        &facts,
    );
    assert_eq!(
        text,
        "cannot allocate: node n1: request gpu: no device of class gpu-mig (MIG is off on this node: gpu.deckhouse.io/allow-mig=false)"
    );
    let without_label = reason(
        slices_with_mig("n1", 1, false),
        &[],
        &claim("p", "gpu-mig", 1, 1),
        &NodeFacts::default(),
    );
    assert_eq!(
        without_label,
        "cannot allocate: node n1: request gpu: no device of class gpu-mig"
    );
}

#[test]
fn gpus_not_driver_ready_are_named_beside_the_nodes_the_engine_knows() {
    let facts = NodeFacts {
        driver_not_ready: BTreeMap::from([
            ("n1".to_owned(), vec!["n1-0000-10".to_owned()]),
            ("n2".to_owned(), vec!["n2-0000-10".to_owned(), "n2-0000-20".to_owned()]),
        ]),
        ..NodeFacts::default()
    };
    let held = [claim("whole", "gpu-physical", 1, 1)];
    let text = reason(slices("n1", 1), &held, &claim("p", "gpu-physical", 1, 1), &facts);
    assert_eq!(
        text,
        "cannot allocate: node n1: request gpu: devices or their cards' counters taken by ns/whole \
         (GPUs not DriverReady: n1-0000-10); node n2: offers no devices, its GPUs are not DriverReady \
         (n2-0000-10, n2-0000-20)"
    );
}

#[test]
fn the_class_cel_error() {
    let text = reason(
        slices("n1", 1),
        &[],
        &claim("p", "gpu-broken", 1, 1),
        &NodeFacts::default(),
    );
    assert!(
        text.starts_with("cannot allocate: claim ns/p: class gpu-broken: selector #0: "),
        "{text}"
    );
    assert!(
        text.len() > "cannot allocate: claim ns/p: class gpu-broken: selector #0: ".len(),
        "{text}"
    );
}

#[test]
fn a_count_larger_than_any_node_can_give() {
    let mut both = slices("n1", 2);
    both.extend(slices("n2", 1));
    let text = reason(both, &[], &claim("p", "gpu-physical", 3, 1), &NodeFacts::default());
    assert_eq!(
        text,
        "cannot allocate: request gpu asks for 3 devices, more than any node can give (at most 2 match on one node); \
         node n1: request gpu: asks for 3 devices, the node has 2 that match; \
         node n2: request gpu: asks for 3 devices, the node has 1 that match"
    );
}

#[test]
fn a_panic_and_long_texts() {
    let panicked = Unallocated::Panicked(EnginePanic("index out of bounds".into()));
    assert_eq!(
        pending_reason(&panicked, &NodeFacts::default(), &BTreeSet::new()),
        "cannot allocate: the allocation engine panicked: index out of bounds; this claim is skipped until it changes"
    );
    let many = NodeFacts {
        driver_not_ready: (0..3)
            .map(|n| (format!("node-{n}"), (0..100).map(|g| format!("gpu-{g}")).collect()))
            .collect(),
        ..NodeFacts::default()
    };
    let text = pending_reason(&Unallocated::NoFit(Explanation::default()), &many, &BTreeSet::new());
    assert_eq!(text.len(), 1024);
    assert!(text.ends_with("..."));
}

#[test]
fn a_claim_that_fits_only_where_its_pod_may_not_run_says_so() {
    let text = pending_reason(
        &Unallocated::NotWherePodRuns(3),
        &NodeFacts::default(),
        &BTreeSet::new(),
    );
    assert!(
        text.starts_with("cannot allocate: it fits only on nodes its Pod may not run on"),
        "{text}"
    );
    assert!(text.contains("none of the 3 nodes"), "{text}");
}
