use super::*;
use serde_json::json;

fn pod(uid: &str, priority: i32, policy: Option<&str>) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid},
        "spec": {"containers": [], "priority": priority, "preemptionPolicy": policy},
        "status": {"startTime": "2026-11-29T10:00:00Z"}}))
    .unwrap()
}

fn nomination(node: &str, priority: i32) -> Nomination {
    Nomination {
        node: node.to_owned(),
        priority,
        victims: BTreeSet::from(["victim".to_owned()]),
        claims: BTreeSet::from(["victim-claim".to_owned()]),
    }
}

#[test]
fn a_nominated_node_is_withheld_from_pods_the_preemptor_outranks_or_equals() {
    let mut preemptions = Preemptions::default();
    preemptions.nominate("trainer", nomination("n1", 1000));
    let nodes = || HashSet::from(["n1".to_owned(), "n2".to_owned()]);
    let allowed = |pod: &Pod| {
        let mut nodes = nodes();
        preemptions.withhold(pod, &mut nodes);
        let mut nodes: Vec<_> = nodes.into_iter().collect();
        nodes.sort();
        nodes
    };
    assert_eq!(allowed(&pod("notebook", 0, None)), ["n2"], "lower priority");
    assert_eq!(allowed(&pod("twin", 1000, None)), ["n2"], "equal priority");
    assert_eq!(allowed(&pod("urgent", 2000, None)), ["n1", "n2"], "higher priority");
    assert_eq!(
        allowed(&pod("trainer", 1000, None)),
        ["n1", "n2"],
        "the preemptor itself"
    );
}

#[test]
fn a_preemption_is_under_way_until_victims_and_their_claims_are_gone() {
    let mut preemptions = Preemptions::default();
    preemptions.nominate("trainer", nomination("n1", 1000));
    let claims = HashSet::from(["victim-claim".to_owned()]);
    assert!(preemptions.under_way("trainer", &HashSet::from(["victim"]), &claims));
    assert!(
        preemptions.under_way("trainer", &HashSet::new(), &claims),
        "the victim is gone, but kube-controller-manager has not deallocated its claim yet"
    );
    assert!(!preemptions.under_way("trainer", &HashSet::new(), &HashSet::new()));
    preemptions.prune(&HashSet::new(), Instant::now());
    assert_eq!(
        preemptions.nomination("trainer"),
        None,
        "no longer gated: the hold ends"
    );
}

#[test]
fn refused_pods_are_passed_over_until_the_refusal_expires() {
    let mut preemptions = Preemptions::default();
    let now = Instant::now();
    preemptions.refuse("guarded", now);
    assert!(!preemptions.holder(&pod("guarded", 0, None)).evictable);
    assert_eq!(
        preemptions.refusals_expire_in(now + Duration::from_secs(4)),
        Some(REFUSAL_MEMORY - Duration::from_secs(4)),
        "a round must come when it expires"
    );
    preemptions.prune(&HashSet::new(), now + REFUSAL_MEMORY);
    assert!(preemptions.holder(&pod("guarded", 0, None)).evictable);
}

#[test]
fn never_preempting_pods_and_priorities_are_read_from_the_spec() {
    assert!(!may_preempt(&pod("p", 1000, Some("Never"))));
    assert!(may_preempt(&pod("p", 1000, Some("PreemptLowerPriority"))));
    let holder = Preemptions::default().holder(&pod("p", 7, None));
    assert_eq!((holder.pod.as_str(), holder.priority), ("ns/p", 7));
    assert_eq!(holder.started, Some("2026-11-29T10:00:00Z".parse().unwrap()));
}
