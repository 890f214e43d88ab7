use std::time::Duration;

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::runtime::watcher::Event;
use serde_json::json;

use super::*;
use crate::claim_store::claim_store;

/// Claim `name` of namespace `ns` (uid `name`) asking for `devices` of `class`; allocated (that many
/// devices of our driver and one of another driver) or not.
fn claim(ns: &str, name: &str, class: &str, devices: usize, allocated: bool) -> ResourceClaim {
    let mut value = json!({"metadata": {"name": name, "namespace": ns, "uid": name},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": class, "count": devices}},
            {"name": "nic", "exactly": {"deviceClassName": "nic"}}]}}});
    if allocated {
        let mut results: Vec<_> = (0..devices)
            .map(|i| json!({"request": "gpu", "driver": "gpu.deckhouse.io", "pool": "gpus/n1", "device": format!("gpu{i}")}))
            .collect();
        results.push(json!({"request": "nic", "driver": "net.example.com", "pool": "n1", "device": "eth0"}));
        value["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    serde_json::from_value(value).unwrap()
}

fn tenant(class: &str, namespace: &str) -> TenantLabels {
    TenantLabels {
        class: class.into(),
        namespace: namespace.into(),
    }
}

/// Allocations and seconds of one tenant at `now`.
fn of(clock: &AllocationClock, class: &str, namespace: &str, now: Instant) -> (u64, f64) {
    clock
        .read(now)
        .get(&tenant(class, namespace))
        .copied()
        .unwrap_or_default()
}

#[test]
fn seconds_accrue_per_device_from_allocation_to_release_and_allocations_are_counted_once() {
    let t0 = Instant::now();
    let at = |seconds: u64| t0 + Duration::from_secs(seconds);
    let (_, writer) = claim_store();
    let clock = AllocationClock::default();
    let mut writer = writer.with_clock(clock.clone());
    writer.apply(Event::Init);
    writer.apply(Event::InitDone);

    writer.apply(Event::Apply(claim("team-a", "train", "h100", 2, false)));
    assert_eq!(clock.read(at(5)), BTreeMap::new(), "a pending claim holds nothing");
    let allocated = StoredClaim::of(claim("team-a", "train", "h100", 2, true));
    let pending = StoredClaim::of(claim("team-a", "train", "h100", 2, false));
    clock.changed(Some(&pending), Some(&allocated), at(10));
    clock.changed(Some(&allocated), Some(&allocated), at(20));
    assert_eq!(
        of(&clock, "h100", "team-a", at(40)),
        (2, 60.0),
        "two devices for 30 s; an update of an allocated claim is no new allocation"
    );
    clock.changed(Some(&allocated), Some(&pending), at(70));
    assert_eq!(
        of(&clock, "h100", "team-a", at(1000)),
        (2, 120.0),
        "nothing accrues after the release"
    );
    assert!(
        clock.read(at(1000)).keys().all(|labels| labels.class != "nic"),
        "other drivers' devices are not ours"
    );

    // Allocated again, then deleted while allocated: a second allocation, released by the deletion.
    clock.changed(Some(&pending), Some(&allocated), at(1000));
    clock.changed(Some(&allocated), None, at(1010));
    assert_eq!(of(&clock, "h100", "team-a", at(2000)), (4, 140.0));
}

#[test]
fn the_first_list_starts_the_clock_of_running_claims_without_counting_them() {
    let t0 = Instant::now();
    let at = |seconds: u64| t0 + Duration::from_secs(seconds);
    let clock = AllocationClock::default();
    let running = |name: &str, ns: &str| {
        (
            format!("{ns}/{name}"),
            StoredClaim::of(claim(ns, name, "mig-1g", 1, true)),
        )
    };
    let first: HashMap<String, StoredClaim> = [running("a", "team-a"), running("b", "team-b")].into();
    clock.listed(&HashMap::new(), &first, at(100));
    assert_eq!(
        of(&clock, "mig-1g", "team-a", at(100)),
        (0, 0.0),
        "earlier time was its predecessor's"
    );
    assert_eq!(of(&clock, "mig-1g", "team-b", at(160)), (0, 60.0));

    // The watch restarts: meanwhile b was deleted and c allocated; a relist tells both.
    let second: HashMap<String, StoredClaim> = [running("a", "team-a"), running("c", "team-a")].into();
    clock.listed(&first, &second, at(200));
    assert_eq!(
        of(&clock, "mig-1g", "team-a", at(260)),
        (1, 160.0 + 60.0),
        "a since the first list, c since the relist"
    );
    assert_eq!(
        of(&clock, "mig-1g", "team-b", at(260)),
        (0, 100.0),
        "b's seconds stopped at the relist"
    );
}

#[test]
fn a_restarted_process_counts_from_zero_at_the_rate_the_claims_hold() {
    // A restart is a new clock (a counter reset to Prometheus): nothing of the running claims'
    // time is counted twice, and it accrues again at once, at two devices a second.
    let t0 = Instant::now();
    let claims: HashMap<String, StoredClaim> = [(
        "team-a/train".to_owned(),
        StoredClaim::of(claim("team-a", "train", "h100", 2, true)),
    )]
    .into();
    let before_restart = AllocationClock::default();
    before_restart.listed(&HashMap::new(), &claims, t0);
    assert_eq!(
        of(&before_restart, "h100", "team-a", t0 + Duration::from_secs(600)).1,
        1200.0
    );
    let after_restart = AllocationClock::default();
    let restarted = t0 + Duration::from_secs(610);
    after_restart.listed(&HashMap::new(), &claims, restarted);
    assert_eq!(
        of(&after_restart, "h100", "team-a", restarted + Duration::from_secs(30)),
        (0, 60.0)
    );
}

#[test]
fn the_claim_store_tells_the_clock_every_event_and_the_scrape_shows_both_counters() {
    let mut registry = Registry::default();
    let clock = AllocationClock::register(&mut registry);
    let (store, writer) = claim_store();
    let mut writer = writer.with_clock(clock.clone());
    writer.apply(Event::Init);
    writer.apply(Event::InitApply(claim("team-a", "old", "h100", 1, true)));
    writer.apply(Event::InitDone);
    writer.apply(Event::Apply(claim("team-b", "new", "h100", 1, false)));
    writer.apply(Event::Apply(claim("team-b", "new", "h100", 1, true)));
    writer.apply(Event::Delete(claim("team-a", "old", "h100", 1, true)));
    assert_eq!(store.state().len(), 1);
    let now = Instant::now();
    let read = clock.read(now);
    assert_eq!(
        read[&tenant("h100", "team-a")].0,
        0,
        "listed at start: running, not new"
    );
    assert_eq!(read[&tenant("h100", "team-b")].0, 1);
    let text = component_base::metrics_text(&registry).unwrap();
    for line in [
        "# TYPE gpu_dra_allocations counter",
        r#"gpu_dra_allocations_total{class="h100",namespace="team-b"} 1"#,
        "# TYPE gpu_dra_allocation_seconds counter",
        r#"gpu_dra_allocation_seconds_total{class="h100",namespace="team-a"} "#,
    ] {
        assert!(text.contains(line), "missing {line} in\n{text}");
    }
}
