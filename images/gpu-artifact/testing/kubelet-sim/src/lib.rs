//! A kubelet simulator for tests, speaking the kubelet's real protocols: plugin discovery and the
//! registration handshake over `<root>/plugins_registry/*-reg.sock`, NodePrepareResources and
//! NodeUnprepareResources over the plugin's DRA socket (v1 or v1beta1, 45 s per call, retries with
//! a doubling backoff and a `FailedPrepareDynamicResources` Event per failure), and the Pod status
//! and final deletion a kubelet writes. Claims are found as the kubelet finds them, including the
//! scheduler's extended-resource claims (`status.extendedResourceClaimStatus`). With the
//! `ResourceHealthStatus` behaviour of the chosen release it streams the plugin's device health
//! (`DRAResourceHealth/NodeWatchResources`) and writes each running Pod's
//! `allocatedResourcesStatus` as the kubelet does.
//!
//! Test-only: never used by product code. It runs no containers; a Pod is Running once its claims
//! are prepared.

mod claim_cache;
mod dra_client;
mod dra_manager;
mod health_cache;
mod health_stream;
mod observations;
mod plugin_registry;
mod pod_api;
mod pod_claims;
mod pod_health;
mod pod_worker;
mod sim;
mod versions;

pub use dra_client::{ClaimId, PreparedDeviceInfo};
pub use observations::CallCounts;
pub use plugin_registry::PluginRegistration;
pub use pod_api::{FAILED_PREPARE_REASON, FAILED_UNPREPARE_REASON};
pub use sim::{KubeletSim, KubeletSimOptions};
pub use versions::{DraVersion, HealthVersion, HealthWatch};
