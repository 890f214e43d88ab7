use super::*;
use serde_json::json;

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).unwrap()
}

fn lease(holder: Option<&str>, acquired: i64, renewed: i64, transitions: i32) -> Lease {
    serde_json::from_value(
        json!({"metadata": {"name": "gpu-dra-controller", "namespace": "d8-gpu"},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": transitions,
                 "acquireTime": at(acquired).to_string(), "renewTime": at(renewed).to_string()}}),
    )
    .unwrap()
}

#[test]
fn a_term_holds_while_renewed_by_us() {
    let won = lease(Some("a"), 0, 0, 3);
    let term = term_of(&won, "a", at(1)).unwrap();
    assert_eq!(
        term,
        Term {
            holder: "a".into(),
            acquired: Some(at(0)),
            transitions: 3
        }
    );
    assert_eq!(
        check(&lease(Some("a"), 0, 10, 3), &term, at(20)),
        Ok(()),
        "renewed at 10, valid to 25"
    );
}

#[test]
fn writes_stop_when_the_lease_moved_on() {
    let term = term_of(&lease(Some("a"), 0, 0, 3), "a", at(1)).unwrap();
    assert_eq!(
        check(&lease(Some("a"), 0, 10, 3), &term, at(25)),
        Err(NotLeading::Expired(at(25))),
        "not renewed in time"
    );
    assert_eq!(
        check(&lease(Some("b"), 20, 20, 4), &term, at(21)),
        Err(NotLeading::OtherHolder("b".into()))
    );
    assert_eq!(
        check(&lease(Some("a"), 30, 30, 5), &term, at(31)),
        Err(NotLeading::NewTerm),
        "b held it in between and a won it back: a write prepared in the old term must not land"
    );
    assert_eq!(
        check(&lease(Some("a"), 0, 30, 4), &term, at(31)),
        Err(NotLeading::NewTerm),
        "the transition count moved"
    );
    assert_eq!(check(&lease(None, 0, 30, 3), &term, at(31)), Err(NotLeading::NoHolder));
}

#[test]
fn a_term_is_not_begun_from_someone_elses_or_an_expired_lease() {
    assert_eq!(
        term_of(&lease(Some("b"), 0, 0, 1), "a", at(1)),
        Err(NotLeading::OtherHolder("b".into()))
    );
    assert_eq!(
        term_of(&lease(Some("a"), 0, 0, 1), "a", at(15)),
        Err(NotLeading::Expired(at(15)))
    );
}
