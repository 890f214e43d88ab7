//! Hardware faults and their repair, as tests cause them: uncorrectable memory errors, row
//! remapping, the recovery action the driver asks for after an Xid, and the GPU reset an
//! administrator runs (`nvidia-smi --gpu-reset`).

use std::io;

use super::MockStateFile;
use crate::state::RemappedRowsState;

/// `nvmlDeviceGpuRecoveryAction_t` values.
pub const RECOVERY_NONE: u32 = 0;
pub const RECOVERY_GPU_RESET: u32 = 1;
pub const RECOVERY_NODE_REBOOT: u32 = 2;

/// The recovery action the driver asks for after `xid`, from the resolution buckets of NVIDIA's
/// Xid catalogue (mig-profiles.md 6.2): RESET_GPU and the double-bit ECC workflow (48) ask for a
/// reset, a card fallen off the bus (79, RESTART_BM) for a reboot; the others ask for nothing.
/// Xid 109 is left out: its bucket is disputed between NVIDIA's sources.
pub fn recovery_action_after_xid(xid: u64) -> Option<u32> {
    match xid {
        46 | 48 | 62 | 64 | 95 | 119 | 120 | 140 | 143 => Some(RECOVERY_GPU_RESET),
        79 => Some(RECOVERY_NODE_REBOOT),
        _ => None,
    }
}

/// Why a reset was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetRefused(pub String);

impl MockStateFile {
    /// Sets the card's uncorrectable memory error counters (volatile: since the last reset).
    pub fn set_uncorrectable_errors(&self, pci_bus_id: &str, volatile: u64, aggregate: u64) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| {
            gpu.uncorrectable_errors_volatile = volatile;
            gpu.uncorrectable_errors_aggregate = aggregate;
        })
    }

    pub fn set_remapped_rows(&self, pci_bus_id: &str, rows: RemappedRowsState) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.remapped_rows = rows)
    }

    pub fn set_recovery_action(&self, pci_bus_id: &str, action: u32) -> io::Result<()> {
        self.update_gpu(pci_bus_id, |gpu| gpu.recovery_action = action)
    }

    /// Resets the card as `nvidia-smi --gpu-reset` does: refused while a process runs on it;
    /// otherwise the card answers again, the volatile error counters and the recovery action clear,
    /// pending row remappings take effect (a remapping failure stays), MIG instances are gone and a
    /// pending MIG mode applies.
    pub fn reset_gpu(&self, pci_bus_id: &str) -> io::Result<Result<(), ResetRefused>> {
        let mut outcome = Ok(());
        self.update_gpu(pci_bus_id, |gpu| {
            if !gpu.processes.is_empty() {
                let pids: Vec<String> = gpu.processes.iter().map(|p| p.pid.to_string()).collect();
                outcome = Err(ResetRefused(format!(
                    "GPU {pci_bus_id} is in use by processes {}",
                    pids.join(", ")
                )));
                return;
            }
            gpu.lost = false;
            gpu.uncorrectable_errors_volatile = 0;
            gpu.recovery_action = RECOVERY_NONE;
            gpu.remapped_rows.pending = false;
            gpu.gpu_instances.clear();
            gpu.mig_current = gpu.mig_pending;
        })?;
        Ok(outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_and_reboot_buckets_ask_for_their_action() {
        assert_eq!(recovery_action_after_xid(48), Some(RECOVERY_GPU_RESET));
        assert_eq!(recovery_action_after_xid(79), Some(RECOVERY_NODE_REBOOT));
        assert_eq!(recovery_action_after_xid(13), None);
        assert_eq!(recovery_action_after_xid(109), None);
    }
}
