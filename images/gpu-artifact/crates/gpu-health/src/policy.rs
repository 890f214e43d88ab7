//! The health policy the ModuleConfig sets (`health`): the Xid classes, the quiet period after
//! which recoverable Xids clear, and whether critical faults evict running Pods.

use std::time::Duration;

use crate::xid_policy::XidPolicy;

/// Default quiet period of recoverable Xids.
pub const DEFAULT_QUIET_PERIOD: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthPolicy {
    pub xid: XidPolicy,
    pub quiet_period: Duration,
    /// Critical faults taint with NoExecute (Pods that do not tolerate it are evicted) instead of
    /// NoSchedule.
    pub no_execute: bool,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        Self {
            xid: XidPolicy::default(),
            quiet_period: DEFAULT_QUIET_PERIOD,
            no_execute: false,
        }
    }
}

/// `10m`, `90s`, `1h30m`: how a duration reads in messages.
pub fn format_duration(duration: Duration) -> String {
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, total % 3600 / 60, total % 60);
    let mut text = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s")] {
        if value > 0 {
            text.push_str(&format!("{value}{unit}"));
        }
    }
    if text.is_empty() { "0s".to_owned() } else { text }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_the_module_config() {
        assert_eq!(format_duration(Duration::from_secs(600)), "10m");
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(2)), "2s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
