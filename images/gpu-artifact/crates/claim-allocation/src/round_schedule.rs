//! When the next allocation round runs. Normally on the next burst of watch events, or when a
//! rate-limited Pending reason falls due. After a failed round (a write or the API failing) it
//! waits with exponential backoff, doubling from 2 s up to 2 minutes, and watch events do not
//! bring it forward, so an API outage is not a hot loop; a round that works resets the backoff.
//! After a write the fence refused, it waits a second for the election to settle. Pure: the
//! caller gives the time.

use std::time::Duration;

use controller_plumbing::Backoff;
use tokio::time::Instant;

/// How a round ended, as far as the schedule cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundOutcome {
    /// It ran; run again by `again_in` even without a watch event, if given.
    Done {
        again_in: Option<Duration>,
    },
    /// The fence refused a write: this replica is not (or no longer) leading.
    NotLeading,
    Failed,
}

/// What to wait for before the next round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextRound {
    /// A watch event, or the time given, whichever comes first.
    OnChange { at_the_latest: Option<Instant> },
    /// This time; watch events meanwhile do not count.
    At(Instant),
}

pub struct RoundSchedule {
    backoff: Backoff,
    next: NextRound,
}

fn fresh_backoff() -> Backoff {
    Backoff::new(Duration::from_secs(2), Duration::from_secs(120))
}

/// How long a replica the fence stopped waits before it checks its term again.
const AFTER_NOT_LEADING: Duration = Duration::from_secs(1);

impl Default for RoundSchedule {
    fn default() -> Self {
        RoundSchedule {
            backoff: fresh_backoff(),
            next: NextRound::OnChange { at_the_latest: None },
        }
    }
}

impl RoundSchedule {
    /// Records how the round that just ended went, at `now`.
    pub fn ended(&mut self, outcome: RoundOutcome, now: Instant) {
        self.next = match outcome {
            RoundOutcome::Done { again_in } => {
                self.backoff = fresh_backoff();
                NextRound::OnChange {
                    at_the_latest: again_in.map(|wait| now + wait),
                }
            }
            RoundOutcome::NotLeading => NextRound::At(now + AFTER_NOT_LEADING),
            RoundOutcome::Failed => NextRound::At(now + self.backoff.next_delay()),
        };
    }

    pub fn next(&self) -> NextRound {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waits(schedule: &RoundSchedule, now: Instant) -> Option<u64> {
        match schedule.next() {
            NextRound::At(at) => Some((at - now).as_secs()),
            NextRound::OnChange { .. } => None,
        }
    }

    #[test]
    fn failed_rounds_back_off_until_one_works() {
        let now = Instant::now();
        let mut schedule = RoundSchedule::default();
        let delays: Vec<_> = (0..8)
            .map(|_| {
                schedule.ended(RoundOutcome::Failed, now);
                waits(&schedule, now)
            })
            .collect();
        let expected = [2, 4, 8, 16, 32, 64, 120, 120].map(Some);
        assert_eq!(delays, expected, "watch events do not shorten any of these waits");
        schedule.ended(RoundOutcome::Done { again_in: None }, now);
        assert_eq!(schedule.next(), NextRound::OnChange { at_the_latest: None });
        schedule.ended(RoundOutcome::Failed, now);
        assert_eq!(waits(&schedule, now), Some(2), "a round that worked reset the backoff");
    }

    #[test]
    fn a_due_reason_or_a_refused_write_sets_the_next_round() {
        let now = Instant::now();
        let mut schedule = RoundSchedule::default();
        schedule.ended(
            RoundOutcome::Done {
                again_in: Some(Duration::from_secs(30)),
            },
            now,
        );
        assert_eq!(
            schedule.next(),
            NextRound::OnChange {
                at_the_latest: Some(now + Duration::from_secs(30))
            }
        );
        schedule.ended(RoundOutcome::NotLeading, now);
        assert_eq!(waits(&schedule, now), Some(1));
    }
}
