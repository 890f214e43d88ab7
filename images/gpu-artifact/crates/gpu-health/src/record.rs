//! What the handler remembers about one card between passes and across restarts: the critical
//! Xids it saw (an Xid is an event, NVML does not repeat it), whether the driver asked for a reset
//! since, when each lasting fault was first seen, and the administrator's last clear.
//!
//! Faults NVML reports on every query (lost, memory errors, row remapping, the recovery action)
//! are not remembered: they last exactly as long as the card says so.

use std::collections::BTreeMap;

use gpu_vendor::{HealthEventKind, HealthReading, RecoveryAction};
use serde::{Deserialize, Serialize};

use crate::policy::HealthPolicy;
use crate::xid_names::xid_label;
use crate::xid_policy::XidClass;

/// A critical Xid seen on the card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LatchedXid {
    /// Unix seconds of the first and the latest occurrence.
    pub first_at: i64,
    pub last_at: i64,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CardRecord {
    /// The card's UUID when last seen: another UUID at the same address is another card.
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub xids: BTreeMap<u64, LatchedXid>,
    /// The driver asked for a reset or a reboot while Xids were kept: once it asks for nothing
    /// again, the card was reset.
    #[serde(default)]
    pub reset_requested: bool,
    /// When each lasting fault (by [`crate::Cause::key`]) was first seen: the taints' time.
    #[serde(default)]
    pub seen_since: BTreeMap<String, i64>,
    /// The value of the clear annotation last acted on (or adopted).
    #[serde(default)]
    pub clear_token: Option<String>,
}

/// Why kept causes went away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Xids cleared.
    pub xids: Vec<u64>,
    /// In words: "the GPU was reset (the driver no longer asks for a reset)".
    pub why: String,
}

/// What the card says now, and what the administrator asked for.
#[derive(Debug, Clone, Copy)]
pub struct Observation<'a> {
    pub uuid: Option<&'a str>,
    pub reading: Option<&'a HealthReading>,
    /// The value of the PhysicalGPU's clear annotation, when set.
    pub clear_token: Option<&'a str>,
    pub now: i64,
}

impl CardRecord {
    /// A card seen for the first time: an existing clear annotation is adopted, not acted on.
    pub fn new(uuid: Option<&str>, clear_token: Option<&str>) -> Self {
        Self {
            uuid: uuid.map(str::to_owned),
            clear_token: clear_token.map(str::to_owned),
            ..Self::default()
        }
    }

    /// Records an event at `now`; for an Xid returns its class (critical ones are kept).
    pub fn record_event(&mut self, kind: &HealthEventKind, policy: &HealthPolicy, now: i64) -> Option<XidClass> {
        let HealthEventKind::Xid { xid, .. } = kind else {
            return None;
        };
        let class = policy.xid.classify(*xid);
        if class == XidClass::Critical {
            let kept = self.xids.entry(*xid).or_insert(LatchedXid {
                first_at: now,
                last_at: now,
                count: 0,
            });
            kept.last_at = now;
            kept.count += 1;
        }
        Some(class)
    }

    /// Applies the recovery rules to what the card says now; returns what recovered and why.
    pub fn observe(&mut self, observation: Observation<'_>, policy: &HealthPolicy) -> Vec<Recovery> {
        let mut recoveries = Vec::new();
        if let (Some(new), Some(old)) = (observation.uuid, self.uuid.as_deref())
            && new != old
        {
            let why = format!("another GPU is at this address (UUID {old} before, {new} now)");
            recoveries.extend(self.clear_all(why));
        }
        if let Some(uuid) = observation.uuid {
            self.uuid = Some(uuid.to_owned());
        }
        match observation.reading.and_then(|r| r.recovery_action) {
            Some(RecoveryAction::None) if self.reset_requested => {
                let why = "the GPU was reset (the NVIDIA driver no longer asks for a reset)".to_owned();
                recoveries.extend(self.clear_all(why));
            }
            Some(action) if action != RecoveryAction::None && !self.xids.is_empty() => self.reset_requested = true,
            _ => {}
        }
        let quiet = policy.quiet_period.as_secs() as i64;
        let quieted: Vec<u64> = self
            .xids
            .iter()
            .filter(|(xid, kept)| policy.xid.recoverable(**xid) && observation.now - kept.last_at >= quiet)
            .map(|(xid, _)| *xid)
            .collect();
        for xid in quieted {
            self.xids.remove(&xid);
            recoveries.push(Recovery {
                xids: vec![xid],
                why: format!(
                    "{} did not repeat for {}",
                    xid_label(xid),
                    crate::policy::format_duration(policy.quiet_period)
                ),
            });
        }
        if observation.clear_token != self.clear_token.as_deref() {
            if let Some(token) = observation.clear_token {
                let why = format!(
                    "an administrator cleared it (annotation {}={token})",
                    crate::CLEAR_ANNOTATION
                );
                recoveries.extend(self.clear_all(why));
            }
            self.clear_token = observation.clear_token.map(str::to_owned);
        }
        if self.xids.is_empty() {
            self.reset_requested = false;
        }
        recoveries
    }

    /// Forgets every kept Xid (a reboot, a reset, a clear); `None` when none was kept.
    pub fn clear_all(&mut self, why: String) -> Option<Recovery> {
        self.reset_requested = false;
        if self.xids.is_empty() {
            return None;
        }
        let xids = std::mem::take(&mut self.xids).into_keys().collect();
        Some(Recovery { xids, why })
    }

    /// When the next kept Xid clears by the quiet period, if one will.
    pub fn next_quiet_recovery(&self, policy: &HealthPolicy) -> Option<i64> {
        let quiet = policy.quiet_period.as_secs() as i64;
        self.xids
            .iter()
            .filter(|(xid, _)| policy.xid.recoverable(**xid))
            .map(|(_, kept)| kept.last_at + quiet)
            .min()
    }
}
