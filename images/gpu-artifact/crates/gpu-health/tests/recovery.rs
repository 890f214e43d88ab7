//! The recovery rules: a critical Xid stays until a reset, a reboot, the quiet period (recoverable
//! Xids only) or an administrator's clear; never because the handler restarted.

use std::time::Duration;

use gpu_health::{CardRecord, HealthLedger, HealthPolicy, Observation, XidClass, XidPolicy, assess};
use gpu_vendor::{HealthEventKind, HealthReading, PciAddress, RecoveryAction, RemappedRows};

const CARD: &str = "0000:41:00.0";

fn card() -> PciAddress {
    CARD.parse().unwrap()
}

fn xid(xid: u64) -> HealthEventKind {
    HealthEventKind::Xid {
        xid,
        gpu_instance_id: None,
        compute_instance_id: None,
    }
}

fn reading(action: RecoveryAction) -> HealthReading {
    HealthReading {
        lost: false,
        uncorrectable_memory_errors: Some(0),
        remapped_rows: Some(RemappedRows::default()),
        recovery_action: Some(action),
    }
}

fn observe(record: &mut CardRecord, reading: &HealthReading, token: Option<&str>, now: i64) -> Vec<Vec<u64>> {
    let observation = Observation {
        uuid: Some("GPU-1"),
        reading: Some(reading),
        clear_token: token,
        now,
    };
    record
        .observe(observation, &HealthPolicy::default())
        .into_iter()
        .map(|r| r.xids)
        .collect()
}

#[test]
fn application_and_ignored_xids_are_not_kept() {
    let policy = HealthPolicy {
        xid: XidPolicy::new([13], [63], [], []),
        ..HealthPolicy::default()
    };
    let mut record = CardRecord::new(Some("GPU-1"), None);
    assert_eq!(record.record_event(&xid(13), &policy, 1), Some(XidClass::Application));
    assert_eq!(record.record_event(&xid(63), &policy, 1), Some(XidClass::Ignored));
    assert_eq!(record.record_event(&HealthEventKind::DeviceLost, &policy, 1), None);
    assert!(record.xids.is_empty());
    assert!(assess(&mut record, Some(&reading(RecoveryAction::None)), &policy, 2).is_healthy());
}

#[test]
fn a_reset_clears_once_the_driver_stops_asking_for_it() {
    let policy = HealthPolicy::default();
    let mut record = CardRecord::new(Some("GPU-1"), None);
    record.record_event(&xid(48), &policy, 100);
    record.record_event(&xid(48), &policy, 105);
    assert_eq!(
        observe(&mut record, &reading(RecoveryAction::GpuReset), None, 106),
        Vec::<Vec<u64>>::new()
    );
    assert!(record.reset_requested);
    let health = assess(&mut record, Some(&reading(RecoveryAction::GpuReset)), &policy, 106);
    assert_eq!(health.reason(), Some("XidCritical"));
    let kept = record.xids[&48];
    assert_eq!((kept.first_at, kept.last_at, kept.count), (100, 105, 2));

    // Hours later, nothing changed: a critical Xid does not heal by waiting.
    assert!(observe(&mut record, &reading(RecoveryAction::GpuReset), None, 100_000).is_empty());
    assert_eq!(
        observe(&mut record, &reading(RecoveryAction::None), None, 100_001),
        vec![vec![48]]
    );
    assert!(assess(&mut record, Some(&reading(RecoveryAction::None)), &policy, 100_001).is_healthy());
}

#[test]
fn without_a_reset_request_a_quiet_reading_proves_nothing() {
    let policy = HealthPolicy::default();
    let mut record = CardRecord::new(Some("GPU-1"), None);
    record.record_event(&xid(79), &policy, 100);
    assert!(observe(&mut record, &reading(RecoveryAction::None), None, 5000).is_empty());
    assert!(!assess(&mut record, Some(&reading(RecoveryAction::None)), &policy, 5000).is_healthy());
}

#[test]
fn recoverable_xids_clear_after_the_quiet_period_and_a_repeat_restarts_it() {
    let policy = HealthPolicy {
        quiet_period: Duration::from_secs(60),
        ..HealthPolicy::default()
    };
    let mut record = CardRecord::new(Some("GPU-1"), None);
    record.record_event(&xid(94), &policy, 1000);
    assert_eq!(record.next_quiet_recovery(&policy), Some(1060));
    record.record_event(&xid(94), &policy, 1050);
    let quiet = reading(RecoveryAction::None);
    assert!(
        record
            .observe(
                Observation {
                    uuid: None,
                    reading: Some(&quiet),
                    clear_token: None,
                    now: 1100
                },
                &policy
            )
            .is_empty()
    );
    let health = assess(&mut record, Some(&quiet), &policy, 1100);
    assert!(
        health
            .describe()
            .contains("clears at 1970-01-01T00:18:30Z if it does not repeat (1m quiet period)"),
        "{}",
        health.describe()
    );
    let recovered = record.observe(
        Observation {
            uuid: None,
            reading: Some(&quiet),
            clear_token: None,
            now: 1110,
        },
        &policy,
    );
    assert_eq!(recovered.len(), 1);
    assert_eq!(recovered[0].why, "Xid 94 (contained ECC error) did not repeat for 1m");
}

#[test]
fn an_administrators_new_clear_value_clears_and_an_old_one_does_not() {
    let policy = HealthPolicy::default();
    // The annotation was already there when the card was first seen: adopted, not acted on.
    let mut record = CardRecord::new(Some("GPU-1"), Some("monday"));
    record.record_event(&xid(79), &policy, 10);
    assert!(observe(&mut record, &reading(RecoveryAction::None), Some("monday"), 11).is_empty());
    assert_eq!(
        observe(&mut record, &reading(RecoveryAction::None), Some("tuesday"), 12),
        vec![vec![79]]
    );
    record.record_event(&xid(79), &policy, 13);
    assert!(
        observe(&mut record, &reading(RecoveryAction::None), Some("tuesday"), 14).is_empty(),
        "used once"
    );
}

#[test]
fn another_card_at_the_address_starts_clean() {
    let policy = HealthPolicy::default();
    let mut record = CardRecord::new(Some("GPU-1"), None);
    record.record_event(&xid(79), &policy, 10);
    let swapped = Observation {
        uuid: Some("GPU-2"),
        reading: Some(&reading(RecoveryAction::None)),
        clear_token: None,
        now: 20,
    };
    let recovered = record.observe(swapped, &policy);
    assert!(
        recovered[0].why.contains("UUID GPU-1 before, GPU-2 now"),
        "{recovered:?}"
    );
}

#[test]
fn the_ledger_survives_a_restart_and_a_reboot_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plugins/gpu.deckhouse.io/health.json");
    let policy = HealthPolicy::default();
    let (mut ledger, recoveries) = HealthLedger::load(&path, "boot-a").unwrap();
    assert!(recoveries.is_empty() && ledger.cards.is_empty());
    ledger
        .card(card(), Some("GPU-1"), None)
        .record_event(&xid(48), &policy, 10);
    ledger.save(&path).unwrap();

    let (restarted, recoveries) = HealthLedger::load(&path, "boot-a").unwrap();
    assert!(recoveries.is_empty());
    assert_eq!(restarted, ledger, "a restart keeps everything");

    let (rebooted, recoveries) = HealthLedger::load(&path, "boot-b").unwrap();
    assert_eq!(recoveries.len(), 1);
    assert_eq!(recoveries[0].0, card());
    assert_eq!(recoveries[0].1.why, "the node rebooted, which resets every GPU");
    assert!(rebooted.cards[&card()].xids.is_empty());
    assert_eq!(rebooted.boot_id, "boot-b");
}

#[test]
fn a_broken_file_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("health.json");
    std::fs::write(&path, "{not json").unwrap();
    let error = HealthLedger::load(&path, "boot").unwrap_err().to_string();
    assert!(error.contains("health.json") && error.contains("not valid"), "{error}");
}
