use super::*;
use crate::test_objects::{claim, device_classes, slices};
use dra_allocator::Allocator;
use k8s_openapi::api::resource::v1::AllocationResult;
use serde_json::json;

fn with(
    mut claim: ResourceClaim,
    allocation: &AllocationResult,
    at: i64,
    reserved: bool,
    prepared: bool,
) -> ResourceClaim {
    let mut allocation = allocation.clone();
    allocation.allocation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(1_800_000_000 + at).unwrap(),
    ));
    let result = &allocation.devices.as_ref().unwrap().results.as_ref().unwrap()[0];
    let mut status = json!({"allocation": allocation});
    if reserved {
        status["reservedFor"] = json!([{"resource": "pods", "name": "p", "uid": "p"}]);
    }
    if prepared {
        status["devices"] = json!([{"driver": result.driver, "pool": result.pool, "device": result.device}]);
    }
    claim.status = Some(serde_json::from_value(status).unwrap());
    claim
}

/// The engine's audit of `claims` (all given the same device), and what the repair decides.
fn repair(claims: &[ResourceClaim]) -> (Vec<InvariantViolation>, Vec<Deallocation>) {
    let mut engine = Allocator::new(&slices("n1", 1), &device_classes(), &[]);
    for claim in claims {
        engine.apply_claim(claim);
    }
    let violations = engine.audit_held();
    let facts = claims
        .iter()
        .map(|c| {
            let key = format!("ns/{}", c.metadata.name.as_deref().unwrap());
            (key, ClaimFacts::of(c))
        })
        .collect();
    let decided = deallocations(&violations, &facts);
    (violations, decided)
}

fn one_card() -> AllocationResult {
    let mut engine = Allocator::new(&slices("n1", 1), &device_classes(), &[]);
    engine
        .allocate(&claim("x", "gpu-physical", 1, 1), None)
        .unwrap()
        .unwrap()
}

#[test]
fn the_claim_not_reserved_gives_the_device_back() {
    let card = one_card();
    let device = card.devices.as_ref().unwrap().results.as_ref().unwrap()[0]
        .device
        .clone();
    let scheduler = with(claim("a", "gpu-physical", 1, 1), &card, 5, true, false);
    let ours = with(claim("b", "gpu-physical", 1, 1), &card, 1, false, false);
    let (violations, decided) = repair(&[scheduler, ours]);
    assert!(
        violations
            .iter()
            .any(|v| v.reason == HELD_TWICE && v.claim == "ns/b" && v.holders == ["ns/a"]),
        "{violations:?}"
    );
    assert_eq!(
        decided,
        [Deallocation {
            claim: "ns/b".into(),
            device: format!("gpus/n1/{device}"),
            kept: vec!["ns/a".into()],
        }],
        "b is older, but a is reserved for its Pod"
    );
    assert_eq!(
        repair_note(&decided[0]),
        format!(
            "device gpus/n1/{device} was also allocated to ns/a; this claim was not yet reserved or prepared, \
             so its allocation was cleared and it is allocated again"
        )
    );
}

#[test]
fn when_nobody_uses_it_the_first_allocation_keeps_it() {
    let card = one_card();
    let claims = [
        with(claim("a", "gpu-physical", 1, 1), &card, 9, false, false),
        with(claim("b", "gpu-physical", 1, 1), &card, 3, false, false),
        with(claim("c", "gpu-physical", 1, 1), &card, 7, false, false),
    ];
    let (_, decided) = repair(&claims);
    let mut going: Vec<_> = decided.iter().map(|d| d.claim.as_str()).collect();
    going.sort();
    assert_eq!(going, ["ns/a", "ns/c"]);
    assert!(decided.iter().all(|d| d.kept == ["ns/b"]));
}

#[test]
fn reserved_or_prepared_claims_are_never_touched() {
    let card = one_card();
    let claims = [
        with(claim("a", "gpu-physical", 1, 1), &card, 1, true, true),
        with(claim("b", "gpu-physical", 1, 1), &card, 2, false, true),
    ];
    let (violations, decided) = repair(&claims);
    assert!(violations.iter().any(|v| v.reason == HELD_TWICE));
    assert_eq!(decided, [], "both are in use: only the audit's report remains");
}

#[test]
fn other_violations_and_unknown_claims_are_left_to_the_report() {
    let violation = |reason: &str| InvariantViolation {
        claim: "ns/b".into(),
        device: "gpus/n1/gpu-0".into(),
        reason: reason.into(),
        holders: vec!["ns/a".into()],
    };
    let movable = ClaimFacts {
        reserved: false,
        prepared: false,
        allocated_at: None,
    };
    let facts = HashMap::from([("ns/b".to_owned(), movable)]);
    assert_eq!(
        deallocations(&[violation("counters of its card are over-committed")], &facts),
        []
    );
    let decided = deallocations(&[violation(HELD_TWICE)], &facts);
    assert_eq!(decided.len(), 1, "a (unknown) stays, b goes");
    assert_eq!(decided[0].kept, ["ns/a"]);
}
