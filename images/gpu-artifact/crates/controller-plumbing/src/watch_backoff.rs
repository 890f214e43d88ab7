//! How fast a watch comes back after the API server (or etcd behind it) went away: the first retry
//! after 250 ms, doubling to at most 2 s, so a component resyncs within a few seconds of the API
//! being back (kube-rs's default climbs to 30 s, which after a minute-long outage leaves a node's
//! view stale for half a minute). Two seconds between attempts is still no load on a recovering
//! API server: one list per component per node.

use std::time::Duration;

use kube::runtime::utils::Backoff;

const FIRST: Duration = Duration::from_millis(250);
const MAX: Duration = Duration::from_secs(2);

/// The backoff of every watch of the module's components (`WatchStreamExt::backoff`).
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: FIRST }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next;
        self.next = (self.next * 2).min(MAX);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_two_seconds_and_starts_over_on_reset() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<u128> = backoff.by_ref().take(6).map(|d| d.as_millis()).collect();
        assert_eq!(delays, [250, 500, 1000, 2000, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(FIRST));
    }
}
