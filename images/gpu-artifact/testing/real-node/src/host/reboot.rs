//! What a reboot changes on the real node's host besides what the node's namespaces reset (tmpfs,
//! processes, mounts): a new kernel boot id, and GPUs that come back empty: no GPU or compute
//! instances, no processes, no lost card, MIG mode as it was set (A100 and H100 keep it).

use std::fs;
use std::path::Path;

use anyhow::Context;
use mock_nvml::state::MockState;

pub fn reboot(root: &Path, mock_state: &Path) -> anyhow::Result<String> {
    let boot_id = fs::read_to_string("/proc/sys/kernel/random/uuid")?.trim().to_owned();
    // Written in place: the node's /proc shows this file through a bind mount of it.
    fs::write(root.join("proc/sys/kernel/random/boot_id"), format!("{boot_id}\n"))?;
    if mock_state.exists() {
        let text = fs::read_to_string(mock_state)?;
        let mut state: MockState = serde_json::from_str(&text).with_context(|| format!("{}", mock_state.display()))?;
        for gpu in state.gpus.values_mut() {
            gpu.gpu_instances.clear();
            gpu.processes.clear();
            gpu.lost = false;
            gpu.mig_current = gpu.mig_pending;
        }
        state.xid_events.clear();
        fs::write(mock_state, serde_json::to_vec(&state)?)?;
    }
    Ok(boot_id)
}
