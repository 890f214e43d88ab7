//! The controller's memory of each claim it could not allocate, so a Pending claim's Event is
//! rate-limited and updated rather than repeated: a claim is explained at most once per
//! [`EXPLAIN_INTERVAL`], and an Event is sent only when the reason's text changed. A claim's entry
//! goes when it is allocated or gone (`prune`). Pure: the caller gives the time.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// The shortest time between two explanations (and so two Events) of one claim.
pub const EXPLAIN_INTERVAL: Duration = Duration::from_secs(30);

struct Note {
    text: String,
    explained: Instant,
}

#[derive(Default)]
pub struct PendingNotes {
    notes: HashMap<String, Note>,
}

impl PendingNotes {
    /// `Ok` when claim `uid` may be explained now, else how long until it may.
    pub fn due(&self, uid: &str, now: Instant) -> Result<(), Duration> {
        match self.notes.get(uid) {
            Some(note) if now.duration_since(note.explained) < EXPLAIN_INTERVAL => {
                Err(EXPLAIN_INTERVAL - now.duration_since(note.explained))
            }
            _ => Ok(()),
        }
    }

    /// Records the reason found for claim `uid`; true when it differs from the last one (an
    /// Event is due).
    pub fn record(&mut self, uid: &str, text: &str, now: Instant) -> bool {
        let changed = self.notes.get(uid).is_none_or(|n| n.text != text);
        self.notes.insert(
            uid.to_owned(),
            Note {
                text: text.to_owned(),
                explained: now,
            },
        );
        changed
    }

    /// The last reason recorded for claim `uid`.
    pub fn text(&self, uid: &str) -> Option<&str> {
        self.notes.get(uid).map(|n| n.text.as_str())
    }

    /// Forgets claim `uid` (it was allocated): a later reason is news again.
    pub fn forget(&mut self, uid: &str) {
        self.notes.remove(uid);
    }

    /// Keeps only the claims in `live`.
    pub fn prune(&mut self, live: &HashSet<String>) {
        self.notes.retain(|uid, _| live.contains(uid));
    }

    pub fn len(&self) -> usize {
        self.notes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.notes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_event_per_reason_and_interval() {
        let start = Instant::now();
        let mut notes = PendingNotes::default();
        assert_eq!(notes.due("a", start), Ok(()));
        assert!(notes.record("a", "no device", start), "first reason: an Event");
        let soon = start + Duration::from_secs(10);
        assert_eq!(notes.due("a", soon), Err(Duration::from_secs(20)), "rate-limited");
        let later = start + EXPLAIN_INTERVAL;
        assert_eq!(notes.due("a", later), Ok(()));
        assert!(!notes.record("a", "no device", later), "same reason: no new Event");
        assert!(
            notes.record("a", "counters taken", later + EXPLAIN_INTERVAL),
            "changed: an Event"
        );
        notes.forget("a");
        assert!(
            notes.record("a", "counters taken", later),
            "after an allocation it is news again"
        );
    }

    #[test]
    fn claims_that_went_are_pruned() {
        let now = Instant::now();
        let mut notes = PendingNotes::default();
        notes.record("a", "x", now);
        notes.record("b", "x", now);
        notes.prune(&HashSet::from(["b".to_owned()]));
        assert_eq!(notes.len(), 1);
        assert_eq!(notes.due("a", now), Ok(()), "a is forgotten");
        assert!(notes.due("b", now).is_err());
    }
}
