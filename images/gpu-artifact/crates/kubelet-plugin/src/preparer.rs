//! What the DRA service hands to the node: one claim at a time, by reference (the kubelet sends
//! only namespace, name and UID), and what comes back.

use std::future::Future;

/// A claim as the kubelet names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl std::fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} ({})", self.namespace, self.name, self.uid)
    }
}

/// One prepared device of a claim, as the DRA `Device` message carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedDevice {
    /// The requests this device was allocated for (empty: all requests).
    pub request_names: Vec<String>,
    pub pool_name: String,
    pub device_name: String,
    pub cdi_device_ids: Vec<String>,
    /// Set for a share of a device that allows multiple allocations (v1 only).
    pub share_id: Option<String>,
}

/// The node's side of the kubelet calls. Both calls must be idempotent: the kubelet repeats them
/// after timeouts and restarts. An `Err` is the per-claim error the kubelet shows and retries on;
/// it must name the claim's problem in words a user understands.
pub trait ClaimPreparer: Send + Sync + 'static {
    fn prepare(&self, claim: ClaimRef) -> impl Future<Output = Result<Vec<PreparedDevice>, String>> + Send;

    /// Must succeed for a claim that is not prepared; must not rely on the ResourceClaim existing.
    fn unprepare(&self, claim: ClaimRef) -> impl Future<Output = Result<(), String>> + Send;
}
