//! Waiting for a condition with a deadline and a failure message a human can act on.

use std::future::Future;
use std::time::{Duration, Instant};

/// One look at the system: done with a value, or not yet with a description of what was seen.
pub enum Progress<T> {
    Done(T),
    Pending(String),
}

/// Looks every 100 ms until `look` is done or `timeout` passes. The error names what was awaited,
/// for how long, and the last thing observed, e.g.
/// `timed out after 30s waiting for pod t-abc/p1 to be bound; last seen: phase Pending, not scheduled: ...`.
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut look: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Progress<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match look().await {
            Ok(Progress::Done(value)) => return Ok(value),
            Ok(Progress::Pending(seen)) => seen,
            Err(error) => format!("error: {error:#}"),
        };
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failure_names_the_wait_and_the_last_observation() {
        let mut n = 0;
        let error = wait_until::<(), _, _>("the answer", Duration::from_millis(250), || {
            n += 1;
            let seen = format!("attempt {n}");
            async move { Ok(Progress::Pending(seen)) }
        })
        .await
        .unwrap_err()
        .to_string();
        assert!(
            error.starts_with("timed out after 250ms waiting for the answer; last seen: attempt "),
            "{error}"
        );
    }

    #[tokio::test]
    async fn returns_the_value_once_done() {
        let mut n = 0;
        let value = wait_until("three looks", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move {
                Ok(if n == 3 {
                    Progress::Done(n)
                } else {
                    Progress::Pending(n.to_string())
                })
            }
        })
        .await
        .unwrap();
        assert_eq!(value, 3);
    }
}
