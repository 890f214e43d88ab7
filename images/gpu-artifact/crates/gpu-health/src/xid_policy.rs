//! Which Xids make a card unhealthy, and which of those heal by themselves.
//!
//! Three classes, set from the ModuleConfig (`health.xid`):
//! - **critical**: the card is unhealthy until it recovers (every Xid not listed otherwise);
//! - **application**: the application's fault, the card stays healthy; counted, nothing else;
//! - **ignored**: dropped (counted as ignored, never logged above debug).
//!
//! `recoverable` names critical Xids that clear after a quiet period without a repeat (NVIDIA's
//! catalogue resolves them by restarting the application, not by resetting the card).

use std::collections::BTreeSet;

/// Xids NVIDIA's device plugin and DRA driver treat as application errors: 13 graphics engine
/// exception, 31 GPU memory page fault, 43 GPU stopped processing, 45 preemptive cleanup, 68 video
/// processor exception, 109 context switch timeout (mig-profiles.md 6.1).
pub const DEFAULT_APPLICATION_XIDS: [u64; 6] = [13, 31, 43, 45, 68, 109];

/// Critical Xids whose resolution bucket in NVIDIA's catalogue is RESTART_APP (8 idle timeout,
/// 32 PBDMA error, 69 graphics class error, 94 contained ECC error): the card is fine once the
/// application that hit them is gone, so they clear after the quiet period.
pub const DEFAULT_RECOVERABLE_XIDS: [u64; 4] = [8, 32, 69, 94];

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XidClass {
    Critical,
    Application,
    Ignored,
}

impl XidClass {
    /// The label value of the metrics (`critical`, `application`, `ignored`).
    pub fn as_str(self) -> &'static str {
        match self {
            XidClass::Critical => "critical",
            XidClass::Application => "application",
            XidClass::Ignored => "ignored",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidPolicy {
    application: BTreeSet<u64>,
    ignored: BTreeSet<u64>,
    /// Forced critical even when also listed as application or ignored.
    critical: BTreeSet<u64>,
    recoverable: BTreeSet<u64>,
}

impl Default for XidPolicy {
    fn default() -> Self {
        Self::new(DEFAULT_APPLICATION_XIDS, [], [], DEFAULT_RECOVERABLE_XIDS)
    }
}

impl XidPolicy {
    pub fn new(
        application: impl IntoIterator<Item = u64>,
        ignored: impl IntoIterator<Item = u64>,
        critical: impl IntoIterator<Item = u64>,
        recoverable: impl IntoIterator<Item = u64>,
    ) -> Self {
        Self {
            application: application.into_iter().collect(),
            ignored: ignored.into_iter().collect(),
            critical: critical.into_iter().collect(),
            recoverable: recoverable.into_iter().collect(),
        }
    }

    /// Forcing wins over ignoring, ignoring over the application list (as NVIDIA's device plugin
    /// lets `DP_ENABLE_HEALTHCHECKS` override its disable list).
    pub fn classify(&self, xid: u64) -> XidClass {
        if self.critical.contains(&xid) {
            XidClass::Critical
        } else if self.ignored.contains(&xid) {
            XidClass::Ignored
        } else if self.application.contains(&xid) {
            XidClass::Application
        } else {
            XidClass::Critical
        }
    }

    /// Whether a critical `xid` clears after the quiet period.
    pub fn recoverable(&self, xid: u64) -> bool {
        self.recoverable.contains(&xid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidias_application_errors_are_not_critical_by_default() {
        let policy = XidPolicy::default();
        for xid in DEFAULT_APPLICATION_XIDS {
            assert_eq!(policy.classify(xid), XidClass::Application, "Xid {xid}");
        }
        for xid in [48, 63, 64, 74, 79, 92, 94, 95, 119] {
            assert_eq!(policy.classify(xid), XidClass::Critical, "Xid {xid}");
        }
        assert!(policy.recoverable(94) && !policy.recoverable(48));
    }

    #[test]
    fn forcing_beats_ignoring_and_ignoring_beats_application() {
        let policy = XidPolicy::new([13, 109], [63, 13], [109], []);
        assert_eq!(policy.classify(63), XidClass::Ignored);
        assert_eq!(policy.classify(13), XidClass::Ignored);
        assert_eq!(policy.classify(109), XidClass::Critical);
        assert_eq!(policy.classify(8), XidClass::Critical);
        assert!(!policy.recoverable(8), "nothing recovers by waiting unless listed");
    }
}
