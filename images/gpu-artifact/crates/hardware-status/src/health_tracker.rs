//! The handler's side of the health model: it records the monitor's events, runs the recovery
//! rules and the assessment on every pass, keeps the ledger file up to date (written only when it
//! changed), exports the health metrics, and says what changed so the handler can tell people
//! (Events on the PhysicalGPU).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use gpu_health::{CardHealth, HealthLedger, HealthPolicy, Observation, Recovery, Severity, XidClass, assess};
use gpu_vendor::{HealthEvent, HealthEventKind, HealthReading, PciAddress};

use crate::health_metrics::{CauseLabels, HealthMetrics, XidLabels};

/// Where the ledger lives and what identifies this boot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthFiles {
    /// The ledger, beside the kubelet plugin's checkpoint (`<plugin dir>/health.json`).
    pub state: PathBuf,
    /// `<host root>/proc/sys/kernel/random/boot_id`.
    pub boot_id: PathBuf,
}

/// One card as a pass sees it.
#[derive(Clone, Copy, Debug)]
pub struct CardInput<'a> {
    pub address: PciAddress,
    pub physical_gpu: &'a str,
    pub uuid: Option<&'a str>,
    pub reading: Option<&'a HealthReading>,
    pub clear_token: Option<&'a str>,
}

/// What a pass changed for one card, for Events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HealthChange {
    /// New critical causes appeared; the message is the full description.
    Unhealthy { address: PciAddress, message: String },
    /// Kept Xids cleared, and why.
    Recovered { address: PciAddress, recovery: Recovery },
    /// The last critical cause went away.
    Healthy { address: PciAddress },
}

pub struct HealthTracker {
    policy: HealthPolicy,
    files: Option<HealthFiles>,
    ledger: HealthLedger,
    saved: HealthLedger,
    metrics: HealthMetrics,
    /// Recoveries found while loading (a reboot), reported on the first pass.
    startup: Vec<(PciAddress, Recovery)>,
    critical: BTreeMap<PciAddress, BTreeSet<String>>,
    names: BTreeMap<PciAddress, String>,
}

impl HealthTracker {
    /// Loads the ledger of `files` (memory only without). A ledger that cannot be read is set
    /// aside as `<file>.unreadable` and the handler starts from an empty one, loudly: refusing to
    /// start would leave the node without a handler.
    pub fn open(policy: HealthPolicy, files: Option<HealthFiles>, metrics: HealthMetrics) -> Self {
        let (ledger, startup) = match &files {
            None => Default::default(),
            Some(files) => {
                let boot_id = std::fs::read_to_string(&files.boot_id)
                    .map(|id| id.trim().to_owned())
                    .unwrap_or_else(|error| {
                        tracing::warn!(path = %files.boot_id.display(), %error, "cannot read the boot id; a reboot will not be noticed");
                        String::new()
                    });
                HealthLedger::load(&files.state, &boot_id).unwrap_or_else(|error| {
                    let aside = files.state.with_extension("json.unreadable");
                    let moved = std::fs::rename(&files.state, &aside);
                    tracing::error!(%error, aside = %aside.display(), ?moved, "the health state file is unreadable; starting from an empty one");
                    Default::default()
                })
            }
        };
        Self {
            policy,
            files,
            saved: ledger.clone(),
            ledger,
            metrics,
            startup,
            critical: BTreeMap::new(),
            names: BTreeMap::new(),
        }
    }

    pub fn policy(&self) -> &HealthPolicy {
        &self.policy
    }

    /// Records a monitor event; `clear_token` is the card's annotation now (adopted when the card is
    /// new). Returns whether anything kept changed.
    pub fn record(&mut self, event: &HealthEvent, clear_token: Option<&str>, now: i64) -> bool {
        let record = self.ledger.card(event.pci_address, None, clear_token);
        let before = record.xids.clone();
        let class = record.record_event(&event.kind, &self.policy, now);
        if let (Some(class), HealthEventKind::Xid { xid, .. }) = (class, &event.kind) {
            let physical_gpu = self.names.get(&event.pci_address).cloned().unwrap_or_default();
            self.metrics.count_xid(XidLabels {
                physicalgpu: physical_gpu,
                pci_address: event.pci_address.to_string(),
                xid: xid.to_string(),
                class: class.as_str().to_owned(),
            });
            match class {
                XidClass::Critical => tracing::warn!(card = %event.pci_address, xid, "critical Xid"),
                XidClass::Application => {
                    tracing::info!(card = %event.pci_address, xid, "application Xid: the card stays healthy")
                }
                XidClass::Ignored => tracing::debug!(card = %event.pci_address, xid, "ignored Xid"),
            }
        }
        self.ledger.cards[&event.pci_address].xids != before
    }

    /// Runs the recovery rules and the assessment for `cards`; saves the ledger when it changed.
    pub fn pass(&mut self, cards: &[CardInput<'_>], now: i64) -> (BTreeMap<PciAddress, CardHealth>, Vec<HealthChange>) {
        let mut changes: Vec<HealthChange> = std::mem::take(&mut self.startup)
            .into_iter()
            .map(|(address, recovery)| HealthChange::Recovered { address, recovery })
            .collect();
        let mut health = BTreeMap::new();
        let mut series = BTreeSet::new();
        for card in cards {
            self.names.insert(card.address, card.physical_gpu.to_owned());
            let record = self.ledger.card(card.address, card.uuid, card.clear_token);
            let observation = Observation {
                uuid: card.uuid,
                reading: card.reading,
                clear_token: card.clear_token,
                now,
            };
            for recovery in record.observe(observation, &self.policy) {
                tracing::info!(card = %card.address, xids = ?recovery.xids, why = %recovery.why, "health recovered");
                changes.push(HealthChange::Recovered {
                    address: card.address,
                    recovery,
                });
            }
            let assessed = assess(record, card.reading, &self.policy, now);
            series.extend(assessed.causes.iter().map(|active| {
                CauseLabels {
                    physicalgpu: card.physical_gpu.to_owned(),
                    pci_address: card.address.to_string(),
                    cause: active.cause.reason().to_owned(),
                    detail: active.cause.detail(),
                    severity: match active.cause.severity() {
                        Severity::Critical => "critical",
                        Severity::Informational => "informational",
                    }
                    .to_owned(),
                }
            }));
            let critical: BTreeSet<String> = assessed.critical().map(|c| c.cause.key()).collect();
            let before = self.critical.insert(card.address, critical.clone()).unwrap_or_default();
            if !critical.is_subset(&before) {
                changes.push(HealthChange::Unhealthy {
                    address: card.address,
                    message: assessed.describe(),
                });
            } else if critical.is_empty() && !before.is_empty() {
                changes.push(HealthChange::Healthy { address: card.address });
            }
            health.insert(card.address, assessed);
        }
        self.metrics.set_causes(series);
        let present: BTreeSet<PciAddress> = cards.iter().map(|c| c.address).collect();
        self.ledger.forget_absent(&|card| present.contains(card));
        self.save();
        (health, changes)
    }

    /// When a kept Xid will clear by the quiet period (the handler must wake then).
    pub fn next_recovery_at(&self) -> Option<i64> {
        self.ledger
            .cards
            .values()
            .filter_map(|record| record.next_quiet_recovery(&self.policy))
            .min()
    }

    fn save(&mut self) {
        if self.ledger == self.saved {
            return;
        }
        if let Some(files) = &self.files
            && let Err(error) = self.ledger.save(&files.state)
        {
            tracing::error!(%error, "cannot save the health state; a restart now would forget it");
            return;
        }
        self.saved = self.ledger.clone();
    }
}

#[cfg(test)]
mod tests {
    use gpu_health::HealthPolicy;
    use gpu_vendor::HealthReading;

    use super::*;

    const CARD: &str = "0000:01:00.0";

    fn xid(xid: u64) -> HealthEvent {
        HealthEvent {
            pci_address: CARD.parse().unwrap(),
            kind: HealthEventKind::Xid {
                xid,
                gpu_instance_id: None,
                compute_instance_id: None,
            },
        }
    }

    fn open(dir: &std::path::Path) -> HealthTracker {
        std::fs::write(dir.join("boot_id"), "boot-1\n").unwrap();
        let files = HealthFiles {
            state: dir.join("health.json"),
            boot_id: dir.join("boot_id"),
        };
        HealthTracker::open(HealthPolicy::default(), Some(files), HealthMetrics::default())
    }

    fn pass(tracker: &mut HealthTracker, now: i64) -> (bool, Vec<HealthChange>) {
        let reading = HealthReading::default();
        let card = CardInput {
            address: CARD.parse().unwrap(),
            physical_gpu: "w-0-10de-20b7",
            uuid: Some("GPU-1"),
            reading: Some(&reading),
            clear_token: None,
        };
        let (health, changes) = tracker.pass(&[card], now);
        (health[&card.address].is_healthy(), changes)
    }

    #[test]
    fn an_application_xid_changes_nothing_a_critical_one_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let mut tracker = open(dir.path());
        assert_eq!(pass(&mut tracker, 1), (true, vec![]));
        assert!(!tracker.record(&xid(13), None, 2), "an application Xid keeps nothing");
        assert_eq!(pass(&mut tracker, 3), (true, vec![]));

        assert!(tracker.record(&xid(79), None, 4));
        let (healthy, changes) = pass(&mut tracker, 5);
        assert!(!healthy);
        assert!(
            matches!(&changes[..], [HealthChange::Unhealthy { message, .. }] if message.contains("critical Xid 79")),
            "{changes:?}"
        );

        drop(tracker);
        let mut restarted = open(dir.path());
        let (healthy, _) = pass(&mut restarted, 6);
        assert!(!healthy, "a restart alone never heals");
        assert_eq!(restarted.next_recovery_at(), None, "Xid 79 does not heal by waiting");
    }
}
