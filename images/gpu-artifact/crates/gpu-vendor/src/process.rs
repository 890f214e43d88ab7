//! Processes running on a card: the evidence that a card is not free.

use serde::{Deserialize, Serialize};

/// A process holding a compute context on a card (or on one of its MIG
/// instances, when the ids are set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuProcess {
    pub pid: u32,
    /// Device memory the process uses, when the library can tell.
    pub used_memory_bytes: Option<u64>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    /// The process's name as the library reports it (for messages naming who holds a card).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}
