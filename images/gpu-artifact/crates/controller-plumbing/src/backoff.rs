//! Exponential backoff for calls that must eventually succeed (the API server at start-up).

use std::future::Future;
use std::time::Duration;

use component_base::Shutdown;

/// Doubling delays from `initial` up to `max`.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self { next: initial, max }
    }

    /// The delay to wait now; the following one doubles, up to the maximum.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }
}

/// At most 5 s between attempts: after an API server or etcd outage every component is writing
/// again within seconds of the API being back (issue 17: resync within 10 s).
impl Default for Backoff {
    fn default() -> Self {
        Self::new(Duration::from_millis(500), Duration::from_secs(5))
    }
}

/// Calls `attempt` until it succeeds, logging each failure with `what`, waiting with backoff in
/// between. Returns `None` only when shutdown is requested first.
pub async fn retry_until_ok<T, E, F, Fut>(what: &str, shutdown: &Shutdown, mut attempt: F) -> Option<T>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut backoff = Backoff::default();
    loop {
        match attempt().await {
            Ok(value) => return Some(value),
            Err(error) => {
                let delay = backoff.next_delay();
                tracing::warn!(%error, retry_in = ?delay, "{what} failed");
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.cancelled() => return None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_maximum() {
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(3));
        let delays: Vec<_> = (0..5).map(|_| backoff.next_delay().as_millis()).collect();
        assert_eq!(delays, [500, 1000, 2000, 3000, 3000]);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_until_the_call_succeeds() {
        let shutdown = Shutdown::new();
        let mut calls = 0;
        let value = retry_until_ok("connect", &shutdown, || {
            calls += 1;
            let ok = calls == 3;
            async move { if ok { Ok(calls) } else { Err("connection refused") } }
        })
        .await;
        assert_eq!(value, Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_only_on_shutdown() {
        let shutdown = Shutdown::new();
        let stopper = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(10)).await;
            stopper.trigger();
        });
        let value: Option<()> = retry_until_ok("connect", &shutdown, || async { Err("down") }).await;
        assert_eq!(value, None);
    }
}
