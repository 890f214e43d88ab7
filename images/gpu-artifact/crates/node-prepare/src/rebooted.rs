//! Claims recorded before a reboot: their MIG instances died with the boot
//! and their CDI specs lived in `/var/run` (a tmpfs). Only a CDI directory
//! configured on persistent storage can still hold a spec; remove it so no
//! container is started with a device that no longer exists.

use crate::atomic_file::remove_durably;
use crate::checkpoint::CheckpointClaim;
use crate::config::NodePrepareConfig;

pub(crate) fn forget_rebooted_claims(config: &NodePrepareConfig, dropped: &[(String, CheckpointClaim)]) {
    for (uid, claim) in dropped {
        tracing::warn!(claim = %claim.label(), uid = %uid, state = ?claim.state, "dropping a claim prepared before the last reboot");
        if let Err(error) = remove_durably(&config.cdi_spec_path(uid)) {
            tracing::warn!(%error, "cannot remove the CDI spec of a claim prepared before the last reboot");
        }
    }
}
