//! Which Xids make a card unhealthy.

use std::collections::BTreeSet;

/// Xids NVIDIA's device plugin and DRA driver treat as application errors
/// (the card stays healthy): 13 graphics engine exception, 31 GPU memory
/// page fault, 43 GPU stopped processing, 45 preemptive cleanup, 68 video
/// processor exception, 109 context switch timeout (mig-profiles.md 6.1).
pub const APPLICATION_XIDS: [u64; 6] = [13, 31, 43, 45, 68, 109];

/// Classifies Xids as critical (card unhealthy) or application-level.
/// Starts from [`APPLICATION_XIDS`]; operators add more to ignore (like the
/// DRA driver's `--additional-xids-to-ignore`) or force some back to
/// critical (like the device plugin's `DP_ENABLE_HEALTHCHECKS`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidPolicy {
    ignored: BTreeSet<u64>,
}

impl Default for XidPolicy {
    fn default() -> Self {
        XidPolicy {
            ignored: APPLICATION_XIDS.into_iter().collect(),
        }
    }
}

impl XidPolicy {
    /// Also treat these Xids as application errors.
    pub fn ignoring(mut self, xids: impl IntoIterator<Item = u64>) -> Self {
        self.ignored.extend(xids);
        self
    }

    /// Treat these Xids as critical even if listed as application errors
    /// (forcing wins over ignoring, as in the device plugin).
    pub fn treating_as_critical(mut self, xids: impl IntoIterator<Item = u64>) -> Self {
        for xid in xids {
            self.ignored.remove(&xid);
        }
        self
    }

    pub fn is_critical(&self, xid: u64) -> bool {
        !self.ignored.contains(&xid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn application_xids_are_not_critical_by_default() {
        let policy = XidPolicy::default();
        for xid in APPLICATION_XIDS {
            assert!(!policy.is_critical(xid), "Xid {xid}");
        }
        for xid in [48, 63, 64, 74, 79, 92, 94, 95, 119] {
            assert!(policy.is_critical(xid), "Xid {xid}");
        }
    }

    #[test]
    fn operators_can_ignore_more_and_force_some_back() {
        let policy = XidPolicy::default().ignoring([63, 92]).treating_as_critical([109]);
        assert!(!policy.is_critical(63));
        assert!(!policy.is_critical(92));
        assert!(policy.is_critical(109));
        assert!(!policy.is_critical(13));
    }
}
