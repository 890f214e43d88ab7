//! The node's prepare, unprepare and claim listing, each under the node lock.
//! Blocking: the gRPC glue calls these from a blocking task.

use std::collections::BTreeMap;
use std::sync::Arc;

use gpu_vendor::VendorBackend;
use kubelet_plugin::{ClaimRef, PreparedDevice};

use crate::bounded_vendor::BoundedVendor;
use crate::checkpoint::{CheckpointClaim, CheckpointData, CheckpointStore};
use crate::config::NodePrepareConfig;
use crate::error::PrepareError;
use crate::node_lock;
use crate::rebooted::forget_rebooted_claims;
use crate::request::PrepareRequest;
use crate::steps::{PREPARE_STEPS, PrepareRun, run_steps};
use crate::teardown::{UNPREPARE, tear_down_claim};

/// Prepares and unprepares claims on this node.
pub struct NodePreparer {
    pub(crate) config: NodePrepareConfig,
    pub(crate) backend: Arc<dyn VendorBackend>,
    pub(crate) store: CheckpointStore,
}

impl NodePreparer {
    /// The preparer of the node `config` describes; every vendor call it makes is bounded by
    /// `config.vendor_call_timeout`.
    pub fn new(config: NodePrepareConfig, backend: Arc<dyn VendorBackend>) -> Self {
        let store = CheckpointStore::new(config.checkpoint_path(), config.boot_id_path());
        let backend = Arc::new(BoundedVendor::new(
            backend,
            config.vendor_call_timeout,
            &config.plugin_dir,
        ));
        NodePreparer { config, backend, store }
    }

    pub fn config(&self) -> &NodePrepareConfig {
        &self.config
    }

    /// Prepares the claim's devices and returns them with their CDI ids.
    /// Idempotent: a prepared claim returns its recorded devices unchanged.
    /// On an error nothing of this attempt is left on the node.
    pub fn prepare(&self, request: &PrepareRequest) -> Result<Vec<PreparedDevice>, PrepareError> {
        let mut run = PrepareRun::new(&self.config, self.backend.as_ref(), &self.store, request);
        run_steps(&PREPARE_STEPS, &mut run)
    }

    /// Takes back everything the claim's prepare made. Succeeds for a claim
    /// the node does not know (the kubelet repeats calls).
    pub fn unprepare(&self, claim: &ClaimRef) -> Result<(), PrepareError> {
        let _lock = node_lock::acquire(&self.config.lock_path(), self.config.lock_timeout)?;
        let (mut data, _) = self.load_current()?;
        if !data.claims.contains_key(&claim.uid) {
            return Ok(());
        }
        tear_down_claim(
            &self.config,
            self.backend.as_ref(),
            &self.store,
            &mut data,
            &claim.uid,
            UNPREPARE,
        )?;
        tracing::info!(claim = %claim, "unprepared");
        Ok(())
    }

    /// The claims in the checkpoint (started and completed), by UID.
    pub fn prepared_claims(&self) -> Result<BTreeMap<String, CheckpointClaim>, PrepareError> {
        Ok(self.store.load()?.data.claims)
    }

    /// The checkpoint of this boot and how many claims of an earlier boot
    /// were forgotten (their CDI specs removed, the checkpoint saved without them).
    pub(crate) fn load_current(&self) -> Result<(CheckpointData, usize), PrepareError> {
        let loaded = self.store.load()?;
        let dropped = loaded.dropped_after_reboot.len();
        if dropped > 0 {
            forget_rebooted_claims(&self.config, &loaded.dropped_after_reboot);
            self.store.save(&loaded.data)?;
        }
        Ok((loaded.data, dropped))
    }
}
