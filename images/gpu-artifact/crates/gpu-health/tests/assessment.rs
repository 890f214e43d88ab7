//! What a card's causes look like to an administrator and to the scheduler: messages, reasons,
//! taints, and first-seen times that stay put while a cause lasts.

use gpu_health::{CardRecord, HealthPolicy, Severity, assess};
use gpu_vendor::{HealthEventKind, HealthReading, RecoveryAction, RemappedRows};

fn rows(pending: bool, failure: bool) -> Option<RemappedRows> {
    Some(RemappedRows {
        correctable: 2,
        uncorrectable: 0,
        pending,
        failure,
    })
}

#[test]
fn a_clean_card_is_healthy_with_nothing_to_say() {
    let mut record = CardRecord::default();
    let health = assess(
        &mut record,
        Some(&HealthReading::default()),
        &HealthPolicy::default(),
        1,
    );
    assert!(health.is_healthy());
    assert_eq!((health.reason(), health.describe()), (None, String::new()));
    assert!(health.taints(4).is_empty());
}

#[test]
fn a_pending_remap_is_a_note_and_a_failed_one_is_critical() {
    let policy = HealthPolicy::default();
    let mut record = CardRecord::default();
    let pending = HealthReading {
        remapped_rows: rows(true, false),
        ..HealthReading::default()
    };
    let health = assess(&mut record, Some(&pending), &policy, 50);
    assert!(health.is_healthy(), "the card stays usable");
    let taints = health.taints(4);
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (
            taints[0].spec.key.as_str(),
            taints[0].spec.value.as_str(),
            taints[0].severity,
            taints[0].since
        ),
        ("gpu.deckhouse.io/row-remap", "pending", Severity::Informational, 50)
    );

    let failed = HealthReading {
        remapped_rows: rows(true, true),
        ..HealthReading::default()
    };
    let health = assess(&mut record, Some(&failed), &policy, 60);
    assert_eq!(health.reason(), Some("RowRemapFailure"));
    assert_eq!(health.taints(4)[0].spec.value, "failed");
    assert!(
        health.describe().contains("the GPU needs replacing"),
        "{}",
        health.describe()
    );
}

#[test]
fn causes_are_ordered_by_seriousness_with_stable_times() {
    let policy = HealthPolicy::default();
    let mut record = CardRecord::default();
    record.record_event(
        &HealthEventKind::Xid {
            xid: 48,
            gpu_instance_id: None,
            compute_instance_id: None,
        },
        &policy,
        10,
    );
    let faulty = HealthReading {
        lost: false,
        uncorrectable_memory_errors: Some(1),
        remapped_rows: rows(true, false),
        recovery_action: Some(RecoveryAction::GpuReset),
    };
    let first = assess(&mut record, Some(&faulty), &policy, 20);
    let reasons: Vec<&str> = first.causes.iter().map(|c| c.cause.reason()).collect();
    assert_eq!(
        reasons,
        [
            "UncorrectableMemoryErrors",
            "XidCritical",
            "RecoveryActionRequired",
            "RowRemapPending"
        ]
    );
    let more = HealthReading {
        uncorrectable_memory_errors: Some(3),
        ..faulty.clone()
    };
    let later = assess(&mut record, Some(&more), &policy, 99);
    let since: Vec<i64> = later.causes.iter().map(|c| c.since).collect();
    assert_eq!(since, [20, 10, 20, 20], "a growing count is the same cause");
    let keys: Vec<String> = later.taints(4).iter().map(|t| t.spec.key.clone()).collect();
    assert_eq!(
        keys,
        [
            "gpu.deckhouse.io/memory",
            "gpu.deckhouse.io/xid",
            "gpu.deckhouse.io/recovery-action",
            "gpu.deckhouse.io/row-remap"
        ]
    );
    assert!(
        later.describe().starts_with(
            "3 uncorrectable memory error(s) since the driver loaded or the GPU was last reset since 1970-01-01T00:00:20Z"
        ),
        "{}",
        later.describe()
    );
    assert!(later.describe().contains("critical Xid 48 (double-bit ECC error) since 1970-01-01T00:00:10Z; it clears after a GPU reset or a reboot, or when an administrator sets a new value of the annotation gpu.deckhouse.io/clear-health on the PhysicalGPU"));
}

#[test]
fn a_lost_card_says_so_and_clears_when_it_answers() {
    let policy = HealthPolicy::default();
    let mut record = CardRecord::default();
    let lost = assess(&mut record, Some(&HealthReading::lost()), &policy, 5);
    assert_eq!(lost.reason(), Some("GPULost"));
    assert_eq!(lost.taints(4)[0].spec.key, "gpu.deckhouse.io/gpu-lost");
    let back = assess(&mut record, Some(&HealthReading::default()), &policy, 6);
    assert!(back.is_healthy());
    assert!(record.seen_since.is_empty(), "the time of a gone cause is forgotten");
}
