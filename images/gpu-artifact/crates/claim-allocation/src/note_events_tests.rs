use super::*;

fn claim_ref() -> ObjectReference {
    ObjectReference {
        api_version: Some("resource.k8s.io/v1".into()),
        kind: Some("ResourceClaim".into()),
        name: Some("c".into()),
        namespace: Some("ns".into()),
        uid: Some("u1".into()),
        ..ObjectReference::default()
    }
}

fn reporter() -> Reporter {
    Reporter {
        controller: "gpu-dra-controller".into(),
        instance: "gpu-dra-controller-0".into(),
    }
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

#[test]
fn the_first_publication_creates_the_event() {
    let regarding = claim_ref();
    let notice = Notice {
        regarding: &regarding,
        warning: true,
        reason: "CannotAllocate",
        action: "Allocate",
        note: "cannot allocate: node n1: ...",
    };
    let Publication::Create(event) = publication(None, &notice, &reporter(), at(0)) else {
        panic!("expected a new Event");
    };
    assert_eq!(
        serde_json::to_value(&event).unwrap(),
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": format!("c.{:x}", at(0).as_nanosecond()), "namespace": "ns"},
            "action": "Allocate", "reason": "CannotAllocate", "type": "Warning",
            "note": "cannot allocate: node n1: ...", "eventTime": "2027-01-15T08:00:00.000000Z",
            "regarding": {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "name": "c",
                          "namespace": "ns", "uid": "u1"},
            "reportingController": "gpu-dra-controller", "reportingInstance": "gpu-dra-controller-0"})
    );
}

#[test]
fn a_later_publication_updates_the_note_and_counts_it() {
    let regarding = claim_ref();
    let notice = Notice {
        regarding: &regarding,
        warning: true,
        reason: "CannotAllocate",
        action: "Allocate",
        note: "cannot allocate: node n1: counters taken by ns/a",
    };
    let before = Published {
        name: "c.17".into(),
        count: 1,
    };
    assert_eq!(
        publication(Some(&before), &notice, &reporter(), at(30)),
        Publication::Patch {
            name: "c.17".into(),
            patch: json!({"message": "cannot allocate: node n1: counters taken by ns/a",
                "series": {"count": 2, "lastObservedTime": "2027-01-15T08:00:30.000000Z"}}),
        }
    );
}
