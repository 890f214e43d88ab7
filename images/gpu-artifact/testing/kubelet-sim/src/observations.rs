//! What the simulator did, for tests to assert on: calls per claim and the CDI ids each Pod got.

use std::collections::BTreeMap;

/// gRPC calls that carried one claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCounts {
    pub prepare: usize,
    pub unprepare: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Observations {
    /// Keyed by `<namespace>/<claim name>`.
    pub calls: BTreeMap<String, CallCounts>,
    /// Keyed by `<namespace>/<pod name>`: claim name -> CDI ids, while the Pod runs.
    pub prepared_pods: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}
