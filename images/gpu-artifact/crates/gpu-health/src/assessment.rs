//! A card's health now: its active causes (kept Xids and what the card reports), each with when
//! it began and how it clears, and the one message every output carries (HardwareHealthy, the
//! kubelet's health stream, Events).

use gpu_vendor::{HealthReading, RecoveryAction};

use crate::cause::{Cause, Severity, TaintSpec};
use crate::policy::{HealthPolicy, format_duration};
use crate::record::CardRecord;

/// One active cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveCause {
    pub cause: Cause,
    /// Unix seconds when it was first seen.
    pub since: i64,
    /// How it goes away, in words.
    pub clears: String,
}

/// A taint for the card's devices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthTaint {
    pub spec: TaintSpec,
    pub severity: Severity,
    /// Unix seconds: the taint's `timeAdded`, stable while the cause lasts.
    pub since: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardHealth {
    /// Critical causes first, then informational; in each the most serious first.
    pub causes: Vec<ActiveCause>,
}

/// Judges the card from its record and reading, and brings the record's first-seen times up to
/// date (a cause that went away forgets its time).
pub fn assess(record: &mut CardRecord, reading: Option<&HealthReading>, policy: &HealthPolicy, now: i64) -> CardHealth {
    let mut reported = Vec::new();
    if let Some(reading) = reading {
        if reading.lost {
            reported.push(Cause::GpuLost);
        }
        if let Some(rows) = reading.remapped_rows {
            if rows.failure {
                reported.push(Cause::RowRemapFailure);
            } else if rows.pending {
                reported.push(Cause::RowRemapPending);
            }
        }
        if let Some(errors) = reading.uncorrectable_memory_errors.filter(|n| *n > 0) {
            reported.push(Cause::UncorrectableMemory { errors });
        }
        if let Some(action) = reading.recovery_action.filter(|a| *a != RecoveryAction::None) {
            reported.push(Cause::RecoveryAction(action));
        }
    }
    record
        .seen_since
        .retain(|key, _| reported.iter().any(|cause| cause.key() == *key));
    let mut causes: Vec<ActiveCause> = reported
        .into_iter()
        .map(|cause| {
            let since = *record.seen_since.entry(cause.key()).or_insert(now);
            ActiveCause {
                clears: clears(&cause, policy, None),
                cause,
                since,
            }
        })
        .collect();
    causes.extend(record.xids.iter().map(|(xid, kept)| ActiveCause {
        cause: Cause::Xid(*xid),
        since: kept.first_at,
        clears: clears(&Cause::Xid(*xid), policy, Some(kept.last_at)),
    }));
    causes.sort_by_key(|c| (c.cause.severity(), c.cause));
    CardHealth { causes }
}

fn clears(cause: &Cause, policy: &HealthPolicy, last_at: Option<i64>) -> String {
    let admin = format!(
        "or when an administrator sets a new value of the annotation {} on the PhysicalGPU",
        crate::CLEAR_ANNOTATION
    );
    match cause {
        Cause::Xid(xid) => match last_at.filter(|_| policy.xid.recoverable(*xid)) {
            Some(last) => format!(
                "it clears at {} if it does not repeat ({} quiet period), after a GPU reset or a reboot, {admin}",
                timestamp(last + policy.quiet_period.as_secs() as i64),
                format_duration(policy.quiet_period)
            ),
            None => format!("it clears after a GPU reset or a reboot, {admin}"),
        },
        Cause::GpuLost => "it clears when the GPU answers NVML again (after a GPU reset or a reboot)".to_owned(),
        Cause::UncorrectableMemory { .. } => {
            "it clears when the error counter starts again (a GPU reset or a driver reload)".to_owned()
        }
        Cause::RowRemapFailure => "the GPU needs replacing".to_owned(),
        Cause::RecoveryAction(_) => "it clears once the driver no longer asks for it".to_owned(),
        Cause::RowRemapPending => "the GPU stays usable; the remapping takes effect at the next GPU reset".to_owned(),
    }
}

impl CardHealth {
    pub fn is_healthy(&self) -> bool {
        self.critical().next().is_none()
    }

    pub fn critical(&self) -> impl Iterator<Item = &ActiveCause> {
        self.causes.iter().filter(|c| c.cause.severity() == Severity::Critical)
    }

    /// The condition reason of the most serious critical cause.
    pub fn reason(&self) -> Option<&'static str> {
        self.critical().next().map(|c| c.cause.reason())
    }

    /// Every cause, most serious first: "critical Xid 79 (...) since 2025-01-01T00:00:00Z; it
    /// clears after ...". Empty for a card with no cause.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .causes
            .iter()
            .map(|c| format!("{} since {}; {}", c.cause.describe(), timestamp(c.since), c.clears))
            .collect();
        parts.join(". Also: ")
    }

    /// One taint per key (the most serious cause of that key wins), at most `max` of them, most
    /// serious first.
    pub fn taints(&self, max: usize) -> Vec<HealthTaint> {
        let mut taints: Vec<HealthTaint> = Vec::new();
        for active in &self.causes {
            let spec = active.cause.taint();
            if taints.iter().any(|t| t.spec.key == spec.key) {
                continue;
            }
            taints.push(HealthTaint {
                spec,
                severity: active.cause.severity(),
                since: active.since,
            });
        }
        taints.truncate(max);
        taints
    }
}

/// RFC 3339 of unix seconds, as Kubernetes prints times.
pub fn timestamp(unix_seconds: i64) -> String {
    jiff::Timestamp::from_second(unix_seconds)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| unix_seconds.to_string())
}
