use super::*;
use crate::test_objects::{claim, device_classes, slices};

/// An engine rebuilt from what the watches currently list.
fn rebuilt(slices: &[ResourceSlice], classes: &[DeviceClass], claims: &[ResourceClaim]) -> Allocator {
    Allocator::new(slices, classes, claims)
}

fn initial_lists(feed: &mut EngineFeed, slices: &[ResourceSlice], claims: &[ResourceClaim]) {
    feed.class_event(Event::Init);
    for class in device_classes() {
        feed.class_event(Event::InitApply(class));
    }
    feed.class_event(Event::InitDone);
    feed.slice_event(Event::Init);
    for slice in slices {
        feed.slice_event(Event::InitApply(slice.clone()));
    }
    feed.slice_event(Event::InitDone);
    feed.claim_event(Event::Init);
    for claim in claims {
        feed.claim_event(Event::InitApply(claim.clone()));
    }
    feed.claim_event(Event::InitDone);
}

fn allocated(feed: &mut EngineFeed, name: &str, class: &str, version: u64) -> ResourceClaim {
    let mut claim = claim(name, class, 1, version);
    let allocation = feed.engine.allocate(&claim, None).unwrap().expect("fits");
    claim.status.get_or_insert_with(Default::default).allocation = Some(allocation);
    claim
}

#[test]
fn events_keep_the_engine_equal_to_a_rebuild() {
    let mut feed = EngineFeed::default();
    let (n1, n2) = (slices("n1", 2), slices("n2", 1));
    initial_lists(&mut feed, &n1, &[]);
    let a = allocated(&mut feed, "a", "gpu-mig", 10);
    feed.claim_event(Event::Apply(a.clone()));
    assert_eq!(
        feed.engine.state(),
        rebuilt(&n1, &device_classes(), std::slice::from_ref(&a)).state()
    );

    let mut both = n1.clone();
    both.extend(n2.iter().cloned());
    for slice in &n2 {
        feed.slice_event(Event::Apply(slice.clone()));
    }
    let b = allocated(&mut feed, "b", "gpu-physical", 11);
    feed.claim_event(Event::Apply(b.clone()));
    assert_eq!(
        feed.engine.state(),
        rebuilt(&both, &device_classes(), &[a.clone(), b.clone()]).state()
    );

    feed.claim_event(Event::Delete(a.clone()));
    feed.slice_event(Event::Delete(n2[0].clone()));
    let rest: Vec<_> = both
        .iter()
        .filter(|s| s.metadata.name != n2[0].metadata.name)
        .cloned()
        .collect();
    assert_eq!(
        feed.engine.state(),
        rebuilt(&rest, &device_classes(), std::slice::from_ref(&b)).state()
    );
}

#[test]
fn a_relist_removes_what_it_no_longer_lists() {
    let mut feed = EngineFeed::default();
    let (n1, n2) = (slices("n1", 1), slices("n2", 1));
    let mut both = n1.clone();
    both.extend(n2.iter().cloned());
    initial_lists(&mut feed, &both, &[]);
    let a = allocated(&mut feed, "a", "gpu-physical", 10);
    feed.claim_event(Event::Apply(a.clone()));
    // The watches restart; meanwhile n2 went away and claim a was deleted.
    initial_lists(&mut feed, &n1, &[]);
    assert_eq!(feed.engine.state(), rebuilt(&n1, &device_classes(), &[]).state());
    assert_eq!(
        feed.engine.device_count(),
        rebuilt(&n1, &device_classes(), &[]).device_count()
    );
}

#[test]
fn our_write_holds_until_the_watch_catches_up() {
    let mut feed = EngineFeed::default();
    let n1 = slices("n1", 1);
    let pending = claim("a", "gpu-physical", 1, 10);
    initial_lists(&mut feed, &n1, std::slice::from_ref(&pending));
    let mut written = allocated(&mut feed, "a", "gpu-physical", 12);
    feed.wrote(&written);
    assert!(feed.awaiting_watch("a"));
    let held = feed.engine.state();

    // An event of the claim from before our write arrives late: it does not give the card back.
    feed.claim_event(Event::Apply(pending.clone()));
    assert_eq!(feed.engine.state(), held, "a stale event is skipped");
    assert!(
        feed.engine
            .allocate(&claim("b", "gpu-physical", 1, 1), None)
            .unwrap()
            .is_none(),
        "the only card is still held by a"
    );

    // The watch brings our write back; later changes apply again.
    feed.claim_event(Event::Apply(written.clone()));
    assert!(!feed.awaiting_watch("a"));
    written.metadata.resource_version = Some("13".into());
    written.status = None;
    feed.claim_event(Event::Apply(written));
    assert_eq!(feed.engine.state(), rebuilt(&n1, &device_classes(), &[]).state());
}

#[test]
fn a_write_the_watch_brought_back_first_is_not_waited_for() {
    let mut feed = EngineFeed::default();
    let n1 = slices("n1", 1);
    let pending = claim("a", "gpu-physical", 1, 10);
    initial_lists(&mut feed, &n1, std::slice::from_ref(&pending));
    let written = allocated(&mut feed, "a", "gpu-physical", 12);
    // The watch event of our write arrives before the API server's answer to it.
    feed.claim_event(Event::Apply(written.clone()));
    feed.wrote(&written);
    assert!(!feed.awaiting_watch("a"), "nothing more will come to end the wait");
    let rebuilt_with_a = rebuilt(&n1, &device_classes(), std::slice::from_ref(&written));
    assert_eq!(feed.engine.state(), rebuilt_with_a.state());

    // The repair case: our deallocation, and then someone else's change, came back first.
    let mut later = written.clone();
    later.metadata.resource_version = Some("14".into());
    later.status = None;
    feed.claim_event(Event::Apply(later.clone()));
    let mut deallocated = written.clone();
    deallocated.metadata.resource_version = Some("13".into());
    deallocated.status = None;
    feed.wrote(&deallocated);
    feed.wrote(&written);
    assert!(!feed.awaiting_watch("a"));
    assert_eq!(
        feed.engine.state(),
        rebuilt(&n1, &device_classes(), &[later]).state(),
        "an answer older than the watch does not take the card again"
    );
}

#[test]
fn a_deleted_claim_we_wrote_is_forgotten() {
    let mut feed = EngineFeed::default();
    let n1 = slices("n1", 1);
    initial_lists(&mut feed, &n1, &[]);
    let written = allocated(&mut feed, "a", "gpu-physical", 12);
    feed.wrote(&written);
    feed.claim_event(Event::Delete(claim("a", "gpu-physical", 1, 10)));
    assert!(!feed.awaiting_watch("a"));
    assert_eq!(feed.engine.state(), rebuilt(&n1, &device_classes(), &[]).state());
}

#[test]
fn a_list_is_applied_as_it_arrives() {
    let mut feed = EngineFeed::default();
    for class in device_classes() {
        feed.class_event(Event::Apply(class));
    }
    let n1 = slices("n1", 2);
    feed.slice_event(Event::Init);
    for slice in &n1 {
        feed.slice_event(Event::InitApply(slice.clone()));
    }
    let full = rebuilt(&n1, &device_classes(), &[]);
    assert_eq!(
        feed.engine.device_count(),
        full.device_count(),
        "the engine holds the devices, not a buffer of the list"
    );
    feed.slice_event(Event::InitDone);
    assert_eq!(feed.engine.state(), full.state());
}

/// A NoSchedule rule on the pool of `node`.
fn drain(node: &str) -> TaintRule {
    TaintRule {
        name: format!("drain-{node}"),
        selector: Some(dra_allocator::TaintRuleSelector {
            pool: Some(format!("gpus/{node}")),
            ..Default::default()
        }),
        taint: k8s_openapi::api::resource::v1::DeviceTaint {
            key: "example.com/maintenance".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        },
    }
}

#[test]
fn taint_rules_reach_the_engine_once_listed_and_leave_it_when_deleted() {
    let mut feed = EngineFeed::default();
    let mut both = slices("n1", 1);
    both.extend(slices("n2", 1));
    initial_lists(&mut feed, &both, &[]);
    feed.taint_rule_event(Event::Init);
    feed.taint_rule_event(Event::InitApply(drain("n1")));
    feed.taint_rule_event(Event::InitApply(drain("n2")));
    feed.taint_rule_event(Event::InitDone);
    let probe = claim("c", "gpu-physical", 1, 1);
    assert_eq!(feed.engine.allocate(&probe, None).unwrap(), None, "both pools drained");
    feed.taint_rule_event(Event::Delete(drain("n2")));
    let allocation = feed.engine.allocate(&probe, None).unwrap().expect("n2 is open again");
    let pools: Vec<String> = allocation
        .devices
        .unwrap()
        .results
        .into_iter()
        .flatten()
        .map(|r| r.pool)
        .collect();
    assert_eq!(pools, ["gpus/n2"]);
}
