use super::*;
use serde_json::json;

fn pod(uid: &str, priority: i32, policy: Option<&str>) -> LeanPod {
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
    let allowed = |pod: &LeanPod| {
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
    assert!(!pod("p", 1000, Some("Never")).may_preempt);
    assert!(pod("p", 1000, Some("PreemptLowerPriority")).may_preempt);
    let holder = Preemptions::default().holder(&pod("p", 7, None));
    assert_eq!((holder.pod.as_str(), holder.priority), ("ns/p", 7));
    assert_eq!(holder.started, Some("2026-11-29T10:00:00Z".parse().unwrap()));
}

/// A Pod on `node`, terminating if `terminating`.
fn on_node(uid: &str, priority: i32, node: &str, terminating: bool) -> Arc<LeanPod> {
    let mut pod = pod(uid, priority, None);
    pod.node_name = Some(node.to_owned());
    if terminating {
        pod.metadata.deletion_timestamp = Some(serde_json::from_value(json!("2026-11-29T11:00:00Z")).unwrap());
    }
    Arc::new(pod)
}

/// A claim allocated on `node` and reserved by the Pod `reserver`.
fn reserved_by(uid: &str, reserver: &str, node: &str) -> StoredClaim {
    StoredClaim::of(
        serde_json::from_value(json!({"metadata": {"name": uid, "namespace": "ns", "uid": uid,
        "resourceVersion": "1"}, "spec": {"devices": {"requests": []}}, "status": {
        "reservedFor": [{"resource": "pods", "name": reserver, "uid": reserver}],
        "allocation": {"devices": {"results": [{"request": "gpu", "driver": "gpu.deckhouse.io",
        "pool": node, "device": "gpu-0"}]}}}}))
        .unwrap(),
    )
}

#[test]
fn a_new_leader_reads_the_nomination_back_and_waits_for_the_terminating_victims() {
    let mut trainer = pod("trainer", 1000, None);
    trainer.nominated_node_name = Some("n1".to_owned());
    let pods = [
        on_node("gone-soon", 0, "n1", true),
        on_node("running", 0, "n1", false),
        on_node("elsewhere", 0, "n2", true),
        on_node("peer", 1000, "n1", true),
    ];
    let claims = [
        reserved_by("gone-soon-claim", "gone-soon", "n1"),
        reserved_by("running-claim", "running", "n1"),
    ];
    let mut preemptions = Preemptions::default();
    preemptions.adopt(&trainer, &pods, &claims);
    assert_eq!(
        preemptions.nomination("trainer"),
        Some(&Nomination {
            node: "n1".to_owned(),
            priority: 1000,
            victims: BTreeSet::from(["gone-soon".to_owned()]),
            claims: BTreeSet::from(["gone-soon-claim".to_owned()]),
        }),
        "only the terminating Pods of lower priority on the nominated node are its victims"
    );
    let live: HashSet<&str> = pods.iter().filter_map(|p| p.metadata.uid.as_deref()).collect();
    let allocated = HashSet::from(["gone-soon-claim".to_owned(), "running-claim".to_owned()]);
    assert!(preemptions.under_way("trainer", &live, &allocated));
    let mut nodes = HashSet::from(["n1".to_owned(), "n2".to_owned()]);
    preemptions.withhold(&pod("notebook", 0, None), &mut nodes);
    assert_eq!(nodes, HashSet::from(["n2".to_owned()]), "the node is held for it");

    // Its own nomination is never replaced by what the status says.
    trainer.nominated_node_name = Some("n2".to_owned());
    preemptions.adopt(&trainer, &pods, &claims);
    assert_eq!(preemptions.nomination("trainer").unwrap().node, "n1");
    let mut plain = Preemptions::default();
    plain.adopt(&pod("fresh", 1000, None), &pods, &claims);
    assert!(!plain.has_nominations(), "no nominatedNodeName, nothing adopted");
}
